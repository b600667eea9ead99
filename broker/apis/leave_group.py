"""LeaveGroup (api key 13): members leave at once instead of waiting for their session to expire.

Versions:
  v0: GroupId, one MemberId
  v1: ThrottleTimeMs in the response
  v2: same as v1
  v3: batch of Members, each MemberId + GroupInstanceId, with per-member errors (KIP-345)
  v4: flexible encoding (KIP-482)
  v5: per-member Reason, logged by the coordinator (KIP-800)
v0-v2 are served as a one-member batch; their response carries the top-level error, or else the
member's error.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.coordinator.results import LeaveGroupResult
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=13, name="LeaveGroup", min_version=0, max_version=5)
async def handle(ctx: RequestContext, request: m.LeaveGroupRequest):
    version = ctx.api_version
    result = ctx.broker.group_coordinator.leave_group(ctx.for_coordinator(), request)
    if not isinstance(result, LeaveGroupResult):  # classic members of a consumer group: once durable
        result: LeaveGroupResult = await result
    if version < 3:
        top = result.error or next((mm.error for mm in result.members if mm.error), ErrorCode.NONE)
        return m.LeaveGroupResponse(error_code=top)
    member_type = m.LeaveGroupResponse.MemberResponse
    return m.LeaveGroupResponse(
        error_code=result.error,
        members=[member_type(member_id=mm.member_id, group_instance_id=mm.group_instance_id,
                             error_code=mm.error) for mm in result.members],
    )
