"""Request/response headers against kafka-python's own header codec, and the v0/v1/v2 rules."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.api_header import RequestHeader as KpRequestHeader
from kafka.protocol.api_header import ResponseHeader as KpResponseHeader

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.headers import (
    decode_request_header,
    decode_response_header,
    encode_request_frame,
    encode_request_header,
    encode_response_frame,
    request_header_version,
    response_header_version,
)

INT32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=150, deadline=None)
@given(api_version=st.integers(0, 12), correlation_id=INT32,
       client_id=st.none() | st.text(max_size=20))
def test_request_header_matches_kafka_python(api_version, correlation_id, client_id):
    api_key = 11  # JoinGroup: flexible from v6, so both header versions are exercised
    flexible = api_version >= 6
    theirs = KpRequestHeader(request_api_key=api_key, request_api_version=api_version,
                             correlation_id=correlation_id, client_id=client_id).encode(flexible=flexible)
    ours = encode_request_header(api_key, api_version, correlation_id, client_id)
    assert ours == theirs
    hdr = decode_request_header(ours + b"body")
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (
        api_key, api_version, correlation_id, client_id)
    assert hdr.body_offset == len(ours)


@settings(max_examples=100, deadline=None)
@given(api_version=st.integers(0, 9), correlation_id=INT32, body=st.binary(max_size=30))
def test_response_frame_matches_kafka_python(api_version, correlation_id, body):
    flexible = api_version >= 6
    theirs = KpResponseHeader(correlation_id=correlation_id).encode(flexible=flexible)
    frame = encode_response_frame(correlation_id, 11, api_version, body)
    assert frame[4:] == theirs + body
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decode_response_header(frame[4:], 11, api_version) == (correlation_id, 4 + len(theirs) - 4)


def test_header_versions():
    assert request_header_version(12, 3) == 1
    assert request_header_version(12, 4) == 2
    assert response_header_version(12, 4) == 1
    assert response_header_version(12, 3) == 0
    # ApiVersions responses always use header v0, even for flexible versions (KIP-511).
    assert request_header_version(18, 3) == 2
    assert response_header_version(18, 3) == 0


def test_unknown_api_is_parsed_as_header_v1():
    raw = encode_request_header(999, 7, 42, "x") + b"\x00"
    hdr = decode_request_header(raw)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (999, 7, 42, "x")
    assert hdr.body_offset == len(raw) - 1


def test_flexible_header_skips_tagged_fields():
    base = encode_request_header(12, 4, 1, "c")[:-1]
    raw = base + b"\x01\x05\x02ab" + b"BODY"     # one unknown tag (5) of 2 bytes
    assert decode_request_header(raw).body_offset == len(base) + 5


def test_request_frame_roundtrip():
    frame = encode_request_frame(12, 4, 9, None, b"xyz")
    hdr = decode_request_header(frame[4:])
    assert hdr.client_id is None and bytes(frame[4 + hdr.body_offset:]) == b"xyz"


@pytest.mark.parametrize("raw", [b"", b"\x00\x0c\x00\x04", b"\x00\x0c\x00\x04\x00\x00\x00\x01\x00\x09ab",
                                 b"\x00\x0c\x00\x04\x00\x00\x00\x01\x00\x02\xff\xfe",
                                 b"\x00\x0c\x00\x04\x00\x00\x00\x01\xff\xff\x01\x05\x09a"])
def test_bad_headers_raise_decode_error(raw):
    with pytest.raises(DecodeError):
        decode_request_header(raw)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=40))
def test_garbage_headers_raise_only_decode_error(raw):
    try:
        hdr = decode_request_header(raw)
    except DecodeError:
        return
    assert hdr.body_offset <= len(raw)
