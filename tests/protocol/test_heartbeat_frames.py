"""protocol/heartbeat_frames agrees with the general codec (headers + messages) on every case.

The hand-written reader either returns exactly what the general decoder reads, or None (then the
broker hands the frame to the general codec); it returns None only for shapes it does not take
(long strings, tagged fields, bad UTF-8, truncation). The response writer's bytes equal the
general encoder's, for every version and error code.
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import heartbeat_frames as hf
from protocol import messages as m
from protocol.errors import ErrorCode
from protocol.headers import decode_request_header, encode_request_frame, encode_response_frame

VERSIONS = range(hf.MAX_VERSION + 1)
short_text = st.text(max_size=40)


def request_frame(version: int, correlation_id: int, client_id: str | None, request) -> bytes:
    body = m.request_codec(hf.API_KEY, version).encode(request)
    return encode_request_frame(hf.API_KEY, version, correlation_id, client_id, body)


def general_read(frame: bytes):
    """What the broker's general path reads: header, then body, with the frame's size stripped."""
    payload = frame[4:]
    header = decode_request_header(payload)
    request, _ = m.request_codec(hf.API_KEY, header.api_version).decode(payload, header.body_offset)
    instance = request.group_instance_id if header.api_version >= 3 else None
    return header.correlation_id, (header.api_version, request.group_id, request.generation_id,
                                   request.member_id, instance)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), correlation_id=st.integers(-2**31, 2**31 - 1),
       client_id=st.none() | short_text, group_id=short_text, member_id=short_text,
       instance=st.none() | short_text, generation=st.integers(-2**31, 2**31 - 1))
def test_reader_agrees_with_the_general_decoder(version, correlation_id, client_id, group_id, member_id,
                                                instance, generation):
    request = m.HeartbeatRequest(group_id=group_id, generation_id=generation, member_id=member_id,
                                 group_instance_id=instance if version >= 3 else None)
    frame = request_frame(version, correlation_id, client_id, request)
    ours = hf.read_request(frame)
    assert ours == general_read(frame)
    assert hf.read_request(frame) == ours  # the remembered answer is the same answer


@pytest.mark.parametrize("version", VERSIONS)
def test_a_remembered_frame_with_another_correlation_id_or_version_reads_afresh(version):
    request = m.HeartbeatRequest(group_id="g", generation_id=7, member_id="m-1",
                                 group_instance_id="i" if version >= 3 else None)
    first = request_frame(version, 1, "client", request)
    second = request_frame(version, 2, "client", request)
    assert hf.read_request(first)[0] == 1
    assert hf.read_request(second) == general_read(second)
    # the same bytes after the correlation id under another version must not reuse the fields
    relabelled = first[:6] + struct.pack(">h", (version + 1) % (hf.MAX_VERSION + 1)) + first[8:]
    theirs = None
    try:
        theirs = general_read(relabelled)
    except Exception:  # not a valid request of that version: the reader must decline too
        pass
    assert hf.read_request(relabelled) in (theirs, None)
    if theirs is None:
        assert hf.read_request(relabelled) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_shapes_the_reader_does_not_take_are_declined(version):
    long_id = "m" * 200  # a compact length over one byte in v4; fine in v0-v3
    request = m.HeartbeatRequest(group_id="g", generation_id=1, member_id=long_id)
    frame = request_frame(version, 5, "c", request)
    assert hf.read_request(frame) in (None, general_read(frame))
    if version < 4:
        assert hf.read_request(frame) == general_read(frame)
    else:
        assert hf.read_request(frame) is None
    bad_client = request_frame(version, 5, "c", m.HeartbeatRequest(group_id="g", member_id="m"))
    bad_client = bad_client[:14] + b"\xff" + bad_client[15:]  # client_id "c" -> invalid UTF-8
    assert hf.read_request(bad_client) is None


def test_tagged_fields_are_left_to_the_general_codec():
    request = m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m",
                                 _unknown_tagged_fields={9: b"x"})
    frame = request_frame(4, 3, "c", request)
    assert general_read(frame)[1][1] == "g"
    assert hf.read_request(frame) is None


@settings(max_examples=200, deadline=None)
@given(version=st.sampled_from(VERSIONS), data=st.data())
def test_every_truncation_is_declined(version, data):
    request = m.HeartbeatRequest(group_id="group", generation_id=3, member_id="member",
                                 group_instance_id="inst" if version >= 3 else None)
    frame = request_frame(version, 9, "client", request)
    cut = data.draw(st.integers(0, len(frame) - 1))
    truncated = frame[:cut]
    if len(truncated) >= 4:  # a frame whose size still claims what was cut off
        assert hf.read_request(truncated) is None
        # and one whose size was fixed up to the truncated length: general decoder agrees or fails
        fixed = struct.pack(">i", len(truncated) - 4) + truncated[4:]
        ours = hf.read_request(fixed)
        if ours is not None:
            assert ours == general_read(fixed)
    else:
        assert hf.read_request(truncated) is None


def test_other_apis_are_declined():
    body = m.request_codec(18, 3).encode(m.ApiVersionsRequest(client_software_name="x",
                                                              client_software_version="1"))
    assert hf.read_request(encode_request_frame(18, 3, 1, "c", body)) is None


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("error", [ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID,
                                   ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID])
def test_response_bytes_equal_the_general_encoder(version, error):
    for correlation_id in (0, 1, -1, 2**31 - 1, -2**31):
        body = m.response_codec(hf.API_KEY, version).encode(m.HeartbeatResponse(error_code=error))
        expected = encode_response_frame(correlation_id, hf.API_KEY, version, body)
        assert hf.response_frame(version, correlation_id, error) == expected
