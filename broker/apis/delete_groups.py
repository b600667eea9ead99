"""DeleteGroups (api key 42): delete Empty groups with their offsets (tombstones in
__consumer_offsets); answered once the tombstones are durable.

Versions:
  v0: GroupsNames; per-group results
  v1: same as v0
  v2: flexible encoding (KIP-482)
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m


@api(key=42, name="DeleteGroups", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: m.DeleteGroupsRequest):
    errors = await ctx.broker.group_coordinator.delete_groups(list(dict.fromkeys(request.groups_names)))
    result_type = m.DeleteGroupsResponse.DeletableGroupResult
    return m.DeleteGroupsResponse(results=[
        result_type(group_id=g, error_code=errors[g]) for g in dict.fromkeys(request.groups_names)])
