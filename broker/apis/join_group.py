"""JoinGroup (api key 11): a member joins (or rejoins) a classic group; answered when the join
phase completes.

Versions:
  v0: session timeout doubles as the rebalance timeout
  v1: RebalanceTimeoutMs
  v2: ThrottleTimeMs in the response
  v3: same as v2
  v4: MEMBER_ID_REQUIRED for an unknown member without an instance id (KIP-394)
  v5: GroupInstanceId, static membership (KIP-345)
  v6: flexible encoding (KIP-482)
  v7: ProtocolType in the response; error responses carry a null ProtocolName (KIP-559)
  v8: Reason (KIP-800)
  v9: SkipAssignment for a static leader rejoining without a rebalance (KIP-814)
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.coordinator.results import JoinGroupResult
from kcoord.protocol import messages as m


def _protocol_name(version: int, name: str | None) -> str | None:
    # Nullable only from v7; older responses carry "" where v7+ carries null.
    if name is None and version < 7:
        return ""
    return name


@api(key=11, name="JoinGroup", min_version=0, max_version=9)
async def handle(ctx: RequestContext, request: m.JoinGroupRequest):
    version = ctx.api_version
    result: JoinGroupResult = await ctx.broker.group_coordinator.join_group(ctx.for_coordinator(), request)
    member_type = m.JoinGroupResponse.JoinGroupResponseMember
    return m.JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=_protocol_name(version, result.protocol_name),
        leader=result.leader_id or "",
        skip_assignment=bool(result.skip_assignment),
        member_id=result.member_id or "",
        members=[member_type(member_id=mm.member_id, group_instance_id=mm.group_instance_id,
                             metadata=mm.metadata) for mm in result.members],
    )
