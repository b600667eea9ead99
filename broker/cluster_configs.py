"""Cluster mode's dynamic config resources (KIP-226 BROKER, KIP-848 GROUP, KIP-714 CLIENT_METRICS): in the
metadata store, followed by every node.

Kafka 4 keeps them as ConfigRecords in the metadata log, which every broker follows
(DynamicConfigPublisher: its DynamicBrokerConfig, the group coordinator's GroupConfigManager, the
ClientMetricsManager's subscriptions); ZooKeeper-era Kafka had `/config/brokers/<default>`,
`/config/brokers/<id>` and `/config/client-metrics/<name>` (and no group configs). Here:

| key                          | value                                                  |
|------------------------------|--------------------------------------------------------|
| `config/brokers/<default>`   | the cluster default's broker config overrides, JSON    |
| `config/brokers/<id>`        | node <id>'s own broker config overrides, JSON          |
| `config/groups/<group id>`   | the group's config overrides, JSON (the id percent-encoded) |
| `config/client-metrics/<name>` | the subscription's configs, JSON (the name percent-encoded) |

A change is the resource's whole new set, put (or deleted when empty) as ZooKeeper-era
AdminZkClient.changeConfigs wrote it, only if nobody changed the resource since the copy it was computed
from (`PrefixFollower.write_on_copy`); a node answers once its own copy has it, and every node hands the
whole mapping {resource name: overrides} to the store that applies it (`on_change`).
"""
from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Callable, Mapping

from kcoord.metadata.prefix_follower import PrefixFollower
from kcoord.metadata.store import Delete, MetadataStore, Op, Put

log = logging.getLogger("kcoord.cluster.configs")

BROKERS = "config/brokers/"
GROUPS = "config/groups/"
CLIENT_METRICS = "config/client-metrics/"
DEFAULT_NAME = "<default>"  # ZooKeeper-era Kafka's ConfigEntityName.DEFAULT: the resource named ""

Layers = dict[str, dict[str, str]]


def _key_name(resource_name: str) -> str:
    return DEFAULT_NAME if resource_name == "" else urllib.parse.quote(resource_name, safe="")


def _resource_name(key_name: str) -> str:
    return "" if key_name == DEFAULT_NAME else urllib.parse.unquote(key_name)


class ClusterConfigResources:
    def __init__(self, store: MetadataStore, prefix: str, on_change: Callable[[Layers], None]) -> None:
        self._prefix = prefix
        self._on_change = on_change
        self.follower = PrefixFollower(store, prefix, self._apply)

    async def start(self) -> None:
        await self.follower.start()

    async def close(self) -> None:
        await self.follower.close()

    def _apply(self, values: Mapping[str, bytes]) -> None:
        layers: Layers = {}
        for name, value in values.items():
            try:
                layers[_resource_name(name)] = {str(k): str(v) for k, v in json.loads(value).items()}
            except (ValueError, TypeError, AttributeError) as exc:
                log.error("ignoring the bad value of %s%s: %s", self._prefix, name, exc)
        self._on_change(layers)

    async def alter(self, resource_name: str, overrides: Mapping[str, str]) -> None:
        """Make `overrides` (validated by the caller, computed from this node's copy) the resource's whole set, in
        the store; answered once this node applies it. StaleCopy: another node changed the resource first (compute
        again); StoreError: not made."""
        key = self._prefix + _key_name(resource_name)
        op: Op = Put(key, json.dumps(dict(sorted(overrides.items()))).encode()) if overrides else Delete(key)
        await self.follower.write_on_copy(_key_name(resource_name), op)
