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
frame is unusual. The coordinator answers at once, except for a classic member of a consumer group whose
write is in flight: that answer (a PendingHeartbeat) comes once the write is durable, as Kafka's runtime
answers a write operation without records only after the writes before it are committed.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kcoord.broker.context import RequestContext
from kcoord.broker.frame_answer import FrameAnswer
from kcoord.broker.registry import api, frame_handler, version_range
from kcoord.coordinator.consumer.classic_members import PendingHeartbeat
from kcoord.protocol import frames
from kcoord.protocol import messages as m

if TYPE_CHECKING:  # the composition root (it imports the server: a run-time import would be a cycle)
    from kcoord.broker.app import Broker

API_KEY = 12


@api(key=API_KEY, name="Heartbeat", min_version=0, max_version=4)
def handle(ctx: RequestContext, request: m.HeartbeatRequest):
    # Not a coroutine: the coordinator answers a heartbeat at once (nearly always), so it is served inline.
    error = ctx.broker.group_coordinator.heartbeat(
        request.group_id,
        request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
        request.generation_id,
    )
    if error.__class__ is PendingHeartbeat:
        return _when_written(error)
    return m.HeartbeatResponse(error_code=error)


async def _when_written(pending: PendingHeartbeat):
    answered = asyncio.get_running_loop().create_future()
    pending.then(lambda error: answered.done() or answered.set_result(error))
    return m.HeartbeatResponse(error_code=await answered)


# A member sends the same bytes every time but for the correlation id: the reader remembers them.
reader = frames.RequestReader("Heartbeat", *version_range(API_KEY), remember=True)
writer = frames.ResponseWriter("Heartbeat", *version_range(API_KEY))
_frames = writer.frames  # frame_v<N>(correlation_id, throttle_time_ms, error_code) by version N


@frame_handler(key=API_KEY)
def serve_frame(broker: Broker, frame: bytes, _client_host: str):
    request = reader.read(frame)
    if request is None:
        return None
    correlation_id, version, (group_id, generation_id, member_id, group_instance_id) = request
    error = broker.group_coordinator.heartbeat(group_id, member_id, group_instance_id, generation_id)
    if error.__class__ is PendingHeartbeat:
        answer = _HeartbeatAnswer(correlation_id, version)
        error.then(answer)  # pyright: ignore[reportAttributeAccessIssue]  (a PendingHeartbeat, by its class)
        return answer.answer()
    return error, _frames[version](correlation_id, 0, error)  # throttle_time_ms 0


class _HeartbeatAnswer(FrameAnswer):
    __slots__ = ("correlation_id", "version")

    def __init__(self, correlation_id: int, version: int) -> None:
        super().__init__()
        self.correlation_id, self.version = correlation_id, version

    def _frame(self, error) -> tuple[int, bytes]:
        return error, _frames[self.version](self.correlation_id, 0, error)
