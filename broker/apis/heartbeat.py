"""Heartbeat (api key 12): keeps a member's session alive and tells it when to rejoin.

Versions:
  v0: GroupId, GenerationId, MemberId
  v1: ThrottleTimeMs in the response
  v2: same as v1
  v3: GroupInstanceId (KIP-345)
  v4: flexible encoding (KIP-482)
"""
from __future__ import annotations

from broker.registry import api
from protocol import messages as m


@api(key=12, name="Heartbeat", min_version=0, max_version=4)
def handle(ctx, request):
    # Not a coroutine: the coordinator answers a heartbeat at once, so the server serves it inline.
    groups = ctx.broker.groups
    error = groups.group_error(request.group_id)
    if error:
        return m.HeartbeatResponse(error_code=error)
    # positional, in handle_heartbeat's order (group_id, member_id, group_instance_id, generation_id):
    # this runs for every heartbeat, and keyword passing through call() costs two dicts
    answer = groups.call(
        "handle_heartbeat",
        request.group_id,
        request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
        request.generation_id,
    )
    if answer.done():
        return m.HeartbeatResponse(error_code=answer.result())
    return _answer_later(answer)


async def _answer_later(answer):
    return m.HeartbeatResponse(error_code=await answer)
