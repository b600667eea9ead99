"""Heartbeat (api key 12): keeps a member's session alive and tells it when to rejoin.

Versions:
  v0: GroupId, GenerationId, MemberId
  v1: ThrottleTimeMs in the response
  v2: same as v1
  v3: GroupInstanceId (KIP-345)
  v4: flexible encoding (KIP-482)

The most frequent request of all (every member, every heartbeat.interval.ms), so besides the
handler it has a frame handler: the same answer, read from and written to whole frames by code
generated from the same message definitions (protocol/frames.py), for the versions registered here.
Both ask the coordinator the same way; the server uses the frame handler unless hooks are set or the
frame is unusual.
"""
from __future__ import annotations

from broker.registry import api, frame_handler, version_range
from protocol import frames
from protocol import messages as m

API_KEY = 12


@api(key=API_KEY, name="Heartbeat", min_version=0, max_version=4)
def handle(ctx, request):
    # Not a coroutine: the coordinator answers a heartbeat at once, so the server serves it inline.
    error = ctx.broker.groups.heartbeat(
        request.group_id,
        request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
        request.generation_id,
    )
    return m.HeartbeatResponse(error_code=error)


# A member sends the same bytes every time but for the correlation id: the reader remembers them.
reader = frames.RequestReader("Heartbeat", *version_range(API_KEY), remember=True)
writer = frames.ResponseWriter("Heartbeat", *version_range(API_KEY))
_frames = writer.frames  # frame_v<N>(correlation_id, throttle_time_ms, error_code) by version N


@frame_handler(key=API_KEY)
def serve_frame(broker, frame, _client_host):
    request = reader.read(frame)
    if request is None:
        return None
    correlation_id, version, (group_id, generation_id, member_id, group_instance_id) = request
    error = broker.groups.heartbeat(group_id, member_id, group_instance_id, generation_id)
    return error, _frames[version](correlation_id, 0, error)  # throttle_time_ms 0
