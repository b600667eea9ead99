"""The connection's protocol layer, driven by feeding it bytes (no sockets)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.broker import registry
from kcoord.broker.connection import CloseConnection, ConnectionState, encode_response, parse_request
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import decode_response_header, encode_request_frame


def frame_of(api_key: int, version: int, body: bytes, correlation_id: int = 7, client_id: str | None = "t") -> bytes:
    """The request payload (size prefix stripped), as the splitter hands it over."""
    return encode_request_frame(api_key, version, correlation_id, client_id, body)[4:]


def api_versions_body(version: int) -> bytes:
    obj = m.ApiVersionsRequest(client_software_name="test", client_software_version="1")
    return m.request_codec(18, min(version, 4)).encode(obj)


def test_api_versions_request_is_parsed_with_its_header():
    req = parse_request(frame_of(18, 3, api_versions_body(3), correlation_id=42))
    assert (req.header.api_key, req.header.api_version, req.header.correlation_id) == (18, 3, 42)
    assert req.header.client_id == "t"
    assert req.body.client_software_name == "test"
    assert not req.unsupported_version


def test_unsupported_api_versions_is_answered_with_a_v0_body_listing_our_range():
    # A client newer than us probes with v5 (flexible header, body we cannot decode).
    req = parse_request(frame_of(18, 5, b"\x05test\x021\x00", correlation_id=9))
    assert req.unsupported_version and req.response_version == 0
    spec = registry.lookup(18)
    import asyncio

    resp = asyncio.run(spec.handler(None, None))
    data = encode_response(req, resp)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    cid, pos = decode_response_header(data[4:], 18, 0)
    body, _ = m.response_codec(18, 0).decode(data[4:], pos)
    assert cid == 9
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
        (18, spec.min_version, spec.max_version)]


def test_unknown_api_key_is_a_protocol_violation():
    with pytest.raises(CloseConnection, match="unknown api key 999"):
        parse_request(frame_of(999, 0, b""))


def test_unsupported_version_of_another_api_closes():
    with pytest.raises(CloseConnection, match="unsupported version 14 of Metadata"):
        parse_request(frame_of(3, 14, b"\x00"))


@pytest.mark.parametrize("payload", [b"", b"\x00\x03", b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x09ab"])
def test_truncated_header_is_a_protocol_violation(payload):
    with pytest.raises(CloseConnection, match="malformed request header"):
        parse_request(payload)


def test_truncated_body_is_a_protocol_violation():
    full = frame_of(3, 1, m.request_codec(3, 1).encode(m.MetadataRequest(topics=[
        m.MetadataRequest.MetadataRequestTopic(name="abc")])))
    with pytest.raises(CloseConnection, match="malformed Metadata v1 request"):
        parse_request(full[:-2])


def test_frames_split_across_reads_come_out_whole_and_in_order():
    state = ConnectionState(max_request_bytes=1000)
    stream = b"".join(encode_request_frame(18, 0, cid, "c", b"") for cid in range(3))
    got = []
    for i in range(len(stream)):  # one byte at a time: the worst case for a partial read
        got += [parse_request(f).header.correlation_id for f in state.receive(stream[i:i + 1])]
    assert got == [0, 1, 2]
    assert state.pending == 3


@pytest.mark.parametrize("size", [1001, 2**31 - 1, -1])
def test_absurd_frame_size_is_a_protocol_violation(size):
    state = ConnectionState(max_request_bytes=1000)
    with pytest.raises(CloseConnection, match="bad frame"):
        state.receive(struct.pack(">i", size) + b"x")


def test_reading_pauses_at_high_water_and_resumes_at_low_water():
    state = ConnectionState(max_request_bytes=1000, high_water=4, low_water=1)
    one = encode_request_frame(18, 0, 1, "c", b"")
    state.receive(one * 3)
    assert not state.should_pause()
    state.receive(one)
    assert state.should_pause() and state.reading_paused
    assert not state.should_pause()  # only once
    for expected in (False, False, True):
        state.request_done(len(one) - 4)
        assert state.should_resume() is expected
    assert not state.reading_paused and state.pending_bytes == len(one) - 4


def test_reading_pauses_on_queued_bytes_too():
    state = ConnectionState(max_request_bytes=10_000, high_water=100, low_water=1, max_queued_bytes=4000)
    big = encode_request_frame(18, 0, 1, "c", b"x" * 2990)  # 3000-byte payload
    state.receive(big)
    assert not state.should_pause()
    state.receive(big)
    assert state.should_pause()
    state.request_done(3000)
    assert not state.should_resume()  # 3000 bytes still queued: above a quarter of 4000
    state.request_done(3000)
    assert state.should_resume()


SERVED = [(s.key, v) for s in registry.served() for v in range(s.min_version, s.max_version + 1)]


@settings(max_examples=300, deadline=None)
@given(api=st.sampled_from(SERVED), body=st.binary(max_size=200), client_id=st.one_of(st.none(), st.text(max_size=20)))
def test_any_body_either_parses_or_is_a_protocol_violation(api, body, client_id):
    """Fuzz target for the decoder: garbage never escapes as anything but CloseConnection."""
    key, version = api
    try:
        req = parse_request(frame_of(key, version, body, client_id=client_id))
    except CloseConnection:
        return
    assert (req.header.api_key, req.header.api_version) == (key, version)


def test_a_whole_frame_may_be_taken_only_with_nothing_before_it():
    state = ConnectionState(max_request_bytes=1000)
    one = encode_request_frame(18, 0, 1, "c", b"")
    size = len(one) - 4
    assert state.takes_whole(size)
    assert not state.takes_whole(1001)  # over socket.request.max.bytes: the general path refuses it
    state.receive(one[:5])               # half a frame held
    assert not state.takes_whole(size)
    assert [bytes(f) for f in state.receive(one[5:])] == [one[4:]]
    assert not state.takes_whole(size)   # a request queued and not yet answered
    state.request_done(size)
    assert state.takes_whole(size)


def test_frames_taken_whole_keep_error_offsets_true_to_the_stream():
    state = ConnectionState(max_request_bytes=1000)
    one = encode_request_frame(18, 0, 1, "c", b"")
    state.served_whole(len(one) - 4)
    with pytest.raises(CloseConnection, match=f"at byte {len(one)}\\)"):
        state.receive(struct.pack(">i", -5))
