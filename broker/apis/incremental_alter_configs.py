"""IncrementalAlterConfigs (key 44): SET / DELETE / APPEND / SUBTRACT configs of topics, the broker and
groups (KIP-339; GROUP resources from KIP-848).

Versions (we serve 0-1):
  v0: resources with (name, operation, value) entries, validate_only
  v1: flexible
Each resource is answered on its own (kcoord.metadata.config_changes): TOPIC -> its overrides, honoured by
storage from the next retention / cleaner pass; BROKER (this node's id, or "" for the cluster default)
-> dynamic broker configs; GROUP (32) -> group-level configs, read by the coordinator through
broker.group_configs.group_config(group_id). Every change is durable before the answer.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.metadata.config_changes import alter_resources, default_of, incremental
from kcoord.protocol import messages as m


@api(key=44, name="IncrementalAlterConfigs", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: m.IncrementalAlterConfigsRequest):
    broker = ctx.broker

    def wanted(current, res):
        ops = [(c.name, c.config_operation, c.value) for c in res.configs]
        return incremental(current, ops, default_of(broker, res.resource_type))

    return await alter_resources(broker, request, m.IncrementalAlterConfigsResponse, wanted)
