"""The generated whole-frame fast paths (protocol/frames.py) agree with the general codec
(protocol/headers.py + protocol/messages.py) for every version they serve.

Readers: a random request frame reads as exactly what the general decoder reads, or as None (the
broker then hands the frame to the general codec); in the common shape (strings of columnar arrays
null or empty, no tagged fields) it is never None. Writers: a random response's frame is the general
encoder's, byte for byte. The version ranges are the APIs' registrations (broker/apis/*.py).
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.broker import registry
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.frame_codegen import MAX_COLUMNAR, columnar
from kcoord.protocol.headers import decode_request_header, encode_request_frame, encode_response_frame
from kcoord.protocol.schema import load_spec
from tests.protocol.reference import messages

FAST_APIS = {"Heartbeat": 12, "OffsetCommit": 8, "ConsumerGroupHeartbeat": 68}


def served(api: str) -> tuple[int, int]:
    spec = registry.lookup(FAST_APIS[api])
    return spec.min_version, spec.max_version


CASES = [(api, v) for api in FAST_APIS for v in range(served(api)[0], served(api)[1] + 1)]
READERS = {api: frames.RequestReader(api, *served(api)) for api in FAST_APIS}
WRITERS = {api: frames.ResponseWriter(api, *served(api)) for api in FAST_APIS}


def _union(fields, low, high):
    return [f for f in fields if any(f.present_in(v) for v in range(low, high + 1))]


def as_fields(obj, fields, low: int, high: int, reading: bool) -> tuple:
    """A general-codec object in the fast paths' tuple form (protocol/frame_codegen.py)."""
    def convert(f, v):
        if v is None:
            return None
        if f.is_array:
            if columnar(f, low, high, reading):
                return tuple(tuple(getattr(e, g.name) for e in v) for g in _union(f.fields, low, high))
            if f.is_struct:
                return [as_fields(e, f.fields, low, high, reading) for e in v]
            return tuple(v)
        if f.is_struct:
            return as_fields(v, f.fields, low, high, reading)
        return v
    return tuple(convert(f, getattr(obj, f.name)) for f in _union(fields, low, high))


def request_frame(api: str, version: int, correlation_id: int, client_id, request) -> bytes:
    body = m.request_codec(FAST_APIS[api], version).encode(request)
    return encode_request_frame(FAST_APIS[api], version, correlation_id, client_id, body)


def general_read(api: str, frame: bytes):
    payload = frame[4:]
    header = decode_request_header(payload)
    request, end = m.request_codec(FAST_APIS[api], header.api_version).decode(payload, header.body_offset)
    assert end == len(payload)
    fields = as_fields(request, load_spec(api + "Request").fields, *served(api), reading=True)
    return header.correlation_id, header.api_version, fields


def common_shape(obj, fields, version: int, low: int, high: int, blank) -> None:
    """Strings of columnar arrays null or empty, recursively (what consumers send)."""
    for f in fields:
        value = getattr(obj, f.name, None)
        if not f.present_in(version) or value is None or not f.is_struct:
            continue
        items = value if f.is_array else [value]
        for e in items:
            if columnar(f, low, high, reading=True):
                for g in f.fields:
                    if g.type == "string" and g.present_in(version):
                        setattr(e, g.name, None if g.nullable_in(version) and blank() else "")
            else:
                common_shape(e, f.fields, version, low, high, blank)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.parametrize(("api", "version"), CASES, ids=[f"{a}-v{v}" for a, v in CASES])
@given(data=st.data(), correlation_id=st.integers(-2**31, 2**31 - 1), client_id=st.none() | st.text(max_size=12))
def test_reader_agrees_with_the_general_decoder(api, version, data, correlation_id, client_id):
    request = data.draw(messages(api + "Request", version))
    frame = request_frame(api, version, correlation_id, client_id, request)
    ours = READERS[api].read(frame)
    assert ours is None or ours == general_read(api, frame)
    common_shape(request, load_spec(api + "Request").fields, version, *served(api), blank=lambda: data.draw(st.booleans()))
    frame = request_frame(api, version, correlation_id, client_id, request)
    assert READERS[api].read(frame) == general_read(api, frame)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.parametrize(("api", "version"), CASES, ids=[f"{a}-v{v}" for a, v in CASES])
@given(data=st.data(), correlation_id=st.integers(-2**31, 2**31 - 1))
def test_writer_agrees_with_the_general_encoder(api, version, data, correlation_id):
    response = data.draw(messages(api + "Response", version))
    key = FAST_APIS[api]
    general = encode_response_frame(correlation_id, key, version, m.response_codec(key, version).encode(response))
    fields = as_fields(response, load_spec(api + "Response").fields, *served(api), reading=False)
    writer = WRITERS[api]
    assert writer.frame(version, correlation_id, *fields) == general
    assert writer.wrap(version, correlation_id, writer.body(version, *fields)) == general


def test_heartbeat_remembers_a_frame_per_version():
    low, high = served("Heartbeat")
    reader = READERS["Heartbeat"]
    for version in range(low, high + 1):
        request = m.HeartbeatRequest(group_id="g", generation_id=7, member_id="m-1",
                                     group_instance_id="i" if version >= 3 else None)
        first = request_frame("Heartbeat", version, 1, "client", request)
        second = request_frame("Heartbeat", version, 2, "client", request)
        assert reader.read(first) == general_read("Heartbeat", first)
        assert reader.read(second) == general_read("Heartbeat", second)
        # the same bytes after the correlation id under another version are read afresh
        other = (version + 1) % (high + 1)
        relabelled = first[:6] + struct.pack(">h", other) + first[8:]
        try:
            theirs = general_read("Heartbeat", relabelled)
        except Exception:  # not a valid request at that version: the reader must decline too
            theirs = None
        assert reader.read(relabelled) == theirs


def commit(version: int, partitions: int = 1, metadata: str | None = "", group_id: str = "g"):
    Topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
    return m.OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=3, member_id="m", topics=[
        Topic(name="t", partitions=[Topic.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=p, committed_metadata=metadata) for p in range(partitions)])])


@pytest.mark.parametrize("version", range(served("OffsetCommit")[0], served("OffsetCommit")[1] + 1))
def test_offset_commit_shapes_left_to_the_general_codec(version):
    reader = READERS["OffsetCommit"]
    declined = {"metadata with text": commit(version, metadata="checkpoint"),
                "more partitions than one unpack takes": commit(version, MAX_COLUMNAR + 1)}
    if version >= 8:
        request = commit(version)
        request.topics[0].partitions[0]._unknown_tagged_fields = {1: b"y"}
        declined["a partition's tagged fields"] = request
        request = commit(version)
        request._unknown_tagged_fields = {3: b"x"}
        declined["tagged fields"] = request
    for what, request in declined.items():
        frame = request_frame("OffsetCommit", version, 5, "c", request)
        general_read("OffsetCommit", frame)  # a valid request, only an unusual one
        assert reader.read(frame) is None, what
    frame = request_frame("OffsetCommit", version, 5, "c", commit(version, group_id="g" * 300))
    assert reader.read(frame) == general_read("OffsetCommit", frame)  # long strings are read
    assert reader.read(frame[:14] + b"\xff" + frame[15:]) is None  # client_id "c" -> invalid UTF-8
    trailing = frame + b"\x00"
    assert reader.read(struct.pack(">i", len(trailing) - 4) + trailing[4:]) is None
    heartbeat = m.request_codec(12, 4).encode(m.HeartbeatRequest(group_id="g", member_id="m"))
    assert reader.read(encode_request_frame(12, 4, 1, "c", heartbeat)) is None
    unserved = encode_request_frame(8, served("OffsetCommit")[1] + 1, 1, "c", b"")
    assert reader.read(unserved) is None


@settings(max_examples=200, deadline=None)
@given(api=st.sampled_from(sorted(FAST_APIS)), data=st.data())
def test_every_truncation_is_declined_or_read_as_the_general_decoder_does(api, data):
    low, high = served(api)
    version = data.draw(st.integers(low, high))
    request = data.draw(messages(api + "Request", version))
    common_shape(request, load_spec(api + "Request").fields, version, low, high, blank=lambda: False)
    frame = request_frame(api, version, 9, "client", request)
    truncated = frame[:data.draw(st.integers(0, len(frame) - 1))]
    assert READERS[api].read(truncated) is None  # its size still claims what was cut off
    if len(truncated) >= 4:  # with its size fixed up: the general decoder agrees, or fails
        fixed = struct.pack(">i", len(truncated) - 4) + truncated[4:]
        ours = READERS[api].read(fixed)
        if ours is not None:
            assert ours == general_read(api, fixed)
