"""Heartbeat (api key 12): keeps a member's session alive and tells it when to rejoin.

Versions:
  v0: GroupId, GenerationId, MemberId
  v1: ThrottleTimeMs in the response
  v2: same as v1
  v3: GroupInstanceId (KIP-345)
  v4: flexible encoding (KIP-482)

The most frequent request of all (every member, every heartbeat.interval.ms), so besides the
handler it has a frame handler: the same answer, read from and written to whole frames directly
(protocol/heartbeat_frames.py). Both ask the coordinator the same way; the server uses the frame
handler unless hooks are set or the frame is unusual.
"""
from __future__ import annotations

from broker.registry import api, frame_handler
from protocol import heartbeat_frames
from protocol import messages as m


@api(key=12, name="Heartbeat", min_version=0, max_version=heartbeat_frames.MAX_VERSION)
def handle(ctx, request):
    # Not a coroutine: the coordinator answers a heartbeat at once, so the server serves it inline.
    error = ctx.broker.groups.heartbeat(
        request.group_id,
        request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
        request.generation_id,
    )
    return m.HeartbeatResponse(error_code=error)


@frame_handler(key=12)
def serve_frame(broker, frame):
    request = heartbeat_frames.read_request(frame)
    if request is None:
        return None
    correlation_id, (version, group_id, generation_id, member_id, group_instance_id) = request
    error = broker.groups.heartbeat(group_id, member_id, group_instance_id, generation_id)
    return error, heartbeat_frames.response_frame(version, correlation_id, error)
