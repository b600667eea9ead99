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

from broker.registry import api
from protocol import messages as m
from protocol.errors import ErrorCode


def _protocol_name(version: int, name: str | None) -> str | None:
    # Nullable only from v7; older responses carry "" where v7+ carries null.
    if name is None and version < 7:
        return ""
    return name


def error_response(version: int, error: ErrorCode, member_id: str = "") -> m.JoinGroupResponse:
    return m.JoinGroupResponse(error_code=error, generation_id=-1, protocol_type=None,
                               protocol_name=_protocol_name(version, None), leader="",
                               member_id=member_id, members=[])


@api(key=11, name="JoinGroup", min_version=0, max_version=9)
async def handle(ctx, request):
    version = ctx.api_version
    groups = ctx.broker.groups
    error = groups.group_error(request.group_id)
    if error:
        return error_response(version, error)
    instance_id = request.group_instance_id if version >= 5 else None
    result = await groups.call(
        "handle_join_group",
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=instance_id,
        require_known_member_id=version >= 4 and instance_id is None,
        client_id=ctx.client_id or "",
        client_host=ctx.client_host,
        rebalance_timeout_ms=request.session_timeout_ms if version == 0 else request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols],
        reason=request.reason if version >= 8 else None,
        request_version=version,
    )
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
