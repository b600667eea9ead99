"""DeleteGroups (api key 42): delete Empty groups with their offsets (tombstones in
__consumer_offsets); answered once the tombstones are durable.

Versions:
  v0: GroupsNames; per-group results
  v1: same as v0
  v2: flexible encoding (KIP-482)
An empty share group's share-partition state (__share_group_state) is deleted first, as Kafka's
GroupCoordinatorService.deleteGroups does; if that fails, the group stays and answers its error.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=42, name="DeleteGroups", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: m.DeleteGroupsRequest):
    groups = list(dict.fromkeys(request.groups_names))
    errors = await _delete_share_state(ctx, groups)
    errors.update(await ctx.broker.group_coordinator.delete_groups([g for g in groups if g not in errors]))
    result_type = m.DeleteGroupsResponse.DeletableGroupResult
    return m.DeleteGroupsResponse(results=[
        result_type(group_id=g, error_code=errors[g]) for g in dict.fromkeys(request.groups_names)])


async def _delete_share_state(ctx: RequestContext, groups: list) -> dict:
    """The groups whose share state could not be deleted, with the error (the others go on)."""
    service = ctx.broker.group_coordinator.service
    failed: dict = {}
    if service is None:
        return failed
    for group_id, _error, _message, group in service.share_group_describe(groups):
        if group is not None and not group.members:
            error = await ctx.broker.share_partitions.delete_group_state(group.group_id)
            if error != ErrorCode.NONE:
                failed[group_id] = error
    return failed
