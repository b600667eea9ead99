"""AlterConfigs (key 33): replace the whole set of config overrides of topics, the broker and groups
(the legacy API; omitted names go back to their defaults).

Versions (we serve 0-2):
  v0: resources with (name, value) entries, validate_only
  v1: same as v0 (throttling after the response, KIP-219)
  v2: flexible
Validation, storage and the resource types are IncrementalAlterConfigs' (kcoord.metadata.config_changes);
a null value is INVALID_REQUEST, as Kafka's ConfigAdminManager answers it.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.metadata.config_changes import ConfigChangeError, alter_resources, check_no_duplicates
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=33, name="AlterConfigs", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: m.AlterConfigsRequest):
    def wanted(_current, res):  # the whole new set: what is not named goes back to its default
        check_no_duplicates([c.name for c in res.configs])
        nulls = [c.name for c in res.configs if c.value is None]
        if nulls:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
        return {c.name: c.value for c in res.configs}

    return await alter_resources(ctx.broker, request, m.AlterConfigsResponse, wanted)
