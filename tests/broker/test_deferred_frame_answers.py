"""A frame handler may answer later, with a future (broker/server.KafkaConnection._serve_frame): the
connection then serves nothing else until it is done, exactly as when a handler awaits. Driven by
feeding bytes to a KafkaConnection with a fake transport; ApiVersions stands in for the API whose
frame handler defers (what it answers does not matter here, only when and in which order)."""
from __future__ import annotations

import asyncio
import struct

from kcoord.broker.server import KafkaConnection
from kcoord.protocol import messages as m
from kcoord.protocol.headers import encode_request_frame

API_VERSIONS = 18


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False
        self.reading_paused = False

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading_paused = True

    def resume_reading(self) -> None:
        self.reading_paused = False

    def correlation_ids(self) -> list[int]:
        return [struct.unpack_from(">i", frame, 4)[0] for frame in self.written]


def request(correlation_id: int) -> bytes:
    body = m.request_codec(API_VERSIONS, 3).encode(m.ApiVersionsRequest(client_software_name="t",
                                                                        client_software_version="1"))
    return encode_request_frame(API_VERSIONS, 3, correlation_id, "deferring", body)


def answer(correlation_id: int) -> bytes:
    return struct.pack(">ii", 4, correlation_id)


def deferring_connection(broker, seq: int = 0) -> tuple[KafkaConnection, FakeTransport, list[asyncio.Future]]:
    """A connection whose frame handler for ApiVersions answers each frame with a new future."""
    futures: list[asyncio.Future] = []

    def defer(_broker, frame, _client_host):
        futures.append(asyncio.get_running_loop().create_future())
        return futures[-1]

    conn = KafkaConnection(broker.server, "PLAINTEXT", 10_000 + seq)
    conn._frame_handlers = {API_VERSIONS: ("ApiVersions", defer)}
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport, futures


async def settle(until=lambda: False) -> None:
    """Let the loop run (requests served through the general path may take a task each)."""
    for _ in range(500):
        if until():
            return
        await asyncio.sleep(0)


async def test_requests_behind_a_deferred_answer_wait_their_turn(kcoord_broker):
    conn, transport, futures = deferring_connection(kcoord_broker)
    conn.data_received(request(1))
    assert len(futures) == 1 and transport.written == []
    assert conn.state.pending == 1  # counted as read ahead, like any request not yet answered
    conn.data_received(request(2))
    conn.data_received(request(3))
    await settle()
    assert transport.written == [] and len(futures) == 1  # queued, not served
    futures[0].set_result((0, answer(1)))
    await settle(lambda: len(transport.written) == 3)
    assert transport.correlation_ids() == [1, 2, 3]  # 2 and 3 through the general path, after 1
    assert transport.written[0] == answer(1)
    assert conn.state.pending == 0
    conn.data_received(request(4))  # idle again: the frame handler takes the next whole frame
    assert len(futures) == 2


async def test_reading_pauses_while_requests_pile_up_behind_a_deferred_answer(kcoord_broker):
    conn, transport, futures = deferring_connection(kcoord_broker)
    conn.data_received(request(1))
    for cid in range(2, conn.state.high_water + 1):
        conn.data_received(request(cid))
    assert transport.reading_paused  # the deferred request counts toward the high-water mark
    futures[0].set_result((0, answer(1)))
    await settle(lambda: len(transport.written) == conn.state.high_water)
    assert not transport.reading_paused
    assert transport.correlation_ids() == list(range(1, conn.state.high_water + 1))


async def test_a_failed_deferred_answer_closes_only_its_connection(kcoord_broker, caplog):
    failing, failing_transport, failing_futures = deferring_connection(kcoord_broker, 1)
    other, other_transport, other_futures = deferring_connection(kcoord_broker, 2)
    failing.data_received(request(1))
    failing.data_received(request(2))
    other.data_received(request(1))
    failing_futures[0].set_exception(RuntimeError("a bug in the frame handler"))
    other_futures[0].set_result((0, answer(1)))
    await settle()
    assert failing_transport.closed and failing_transport.written == []
    assert "error while serving a request" in caplog.text
    assert not other_transport.closed and other_transport.correlation_ids() == [1]


async def test_a_paused_writer_holds_the_queue_after_a_deferred_answer(kcoord_broker):
    conn, transport, futures = deferring_connection(kcoord_broker)
    conn.data_received(request(1))
    conn.data_received(request(2))
    conn.pause_writing()
    futures[0].set_result((0, answer(1)))
    await settle()
    assert transport.correlation_ids() == [1]  # written: the transport buffers it
    conn.resume_writing()
    await settle(lambda: len(transport.written) == 2)
    assert transport.correlation_ids() == [1, 2]


async def test_a_deferred_answer_after_the_connection_is_lost_is_dropped(kcoord_broker, caplog):
    conn, transport, futures = deferring_connection(kcoord_broker)
    conn.data_received(request(1))
    conn.data_received(request(2))
    conn.connection_lost(None)
    futures[0].set_result((0, answer(1)))
    await settle()
    assert transport.written == [] and "error while serving" not in caplog.text
    assert conn.closed.done()


async def test_drain_and_close_waits_for_a_deferred_answer(kcoord_broker):
    conn, transport, futures = deferring_connection(kcoord_broker)
    conn.data_received(request(1))
    conn.data_received(request(2))
    conn.drain_and_close()
    await settle()
    assert not transport.closed
    futures[0].set_result((0, answer(1)))
    await settle(lambda: transport.closed)
    assert transport.correlation_ids() == [1, 2] and transport.closed
