"""Truncated, oversized and garbage input only ever raises DecodeError, and a length prefix is never
trusted beyond the bytes that are actually there."""
from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol import messages as m
from kcoord.protocol.errors import DecodeError
from tests.protocol.reference import sample_message
from tests.protocol.test_conformance import CASES

_FAST = settings(max_examples=10, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("name", "version"), CASES)
def test_every_truncation_is_a_decode_error(name, version):
    codec = m.codec(name, version)
    full = codec.encode(sample_message(name, version))
    assert codec.decode(full) == (sample_message(name, version), len(full))
    for cut in range(len(full)):
        with pytest.raises(DecodeError) as info:
            codec.decode(full[:cut])
        assert info.value.api == name and info.value.version == version
        assert info.value.offset is not None and 0 <= info.value.offset <= cut


@pytest.mark.parametrize(("name", "version"), CASES)
def test_garbage_and_mutations_raise_only_decode_error(name, version):
    codec = m.codec(name, version)
    valid = codec.encode(sample_message(name, version))

    @_FAST
    @given(garbage=st.binary(max_size=64), flips=st.lists(st.tuples(st.integers(0, max(len(valid) - 1, 0)),
                                                                     st.integers(0, 255)), max_size=4))
    def check(garbage, flips):
        mutated = bytearray(valid)
        for at, value in flips if valid else ():
            mutated[at] = value
        for data in (garbage, bytes(mutated), memoryview(bytes(mutated))):
            try:
                _obj, end = codec.decode(data)
            except DecodeError:
                continue
            assert end <= len(data)

    check()


ABSURD = [
    # (message, version, body) where a length/count prefix claims far more than is present
    ("JoinGroupRequest", 5, b"\x7f\xff" + b"g"),                          # string of 32767 bytes
    ("SyncGroupRequest", 3, b"\x00\x01g\x00\x00\x00\x01\x00\x01m\xff\xff\x7f\xff\xff\xff"),  # array 2^31-1
    ("JoinGroupRequest", 6, b"\xff\xff\xff\xff\x0f"),                     # compact string 2^32-2
    ("OffsetCommitRequest", 8, b"\x02g\x00\x00\x00\x01\x02m\x01\xff\xff\xff\xff\x07"),  # compact array
    # FetchResponse v4 whose last partition's records (int32 length, then bytes) claims 2^31-1 bytes
    ("FetchResponse", 4, m.codec("FetchResponse", 4).encode(m.FetchResponse(responses=[
        m.FetchResponse.FetchableTopicResponse(topic="t", partitions=[
            m.FetchResponse.PartitionData(records=b"abc")])]))[:-7] + b"\x7f\xff\xff\xffabc"),
]


@pytest.mark.parametrize(("name", "version", "body"), ABSURD)
def test_absurd_length_prefix_allocates_nothing(name, version, body):
    codec = m.codec(name, version)
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError):
            codec.decode(body)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024


def test_overlong_varint_is_refused():
    with pytest.raises(DecodeError, match="too long"):
        m.codec("HeartbeatRequest", 4).decode(b"\xff\xff\xff\xff\xff\xff\x01")


def test_non_nullable_null_is_refused_with_its_field_name():
    with pytest.raises(DecodeError, match="group_id"):
        m.codec("HeartbeatRequest", 3).decode(b"\xff\xff" + b"\x00" * 20)


def test_invalid_utf8_is_a_decode_error_at_the_string():
    body = b"\x00\x02\xc3\x28" + b"\x00" * 20
    with pytest.raises(DecodeError) as info:
        m.codec("HeartbeatRequest", 3).decode(body)
    assert info.value.offset == 2


def test_tagged_field_overrunning_its_size_is_refused():
    # HeartbeatRequest v4 with a tag section holding tag 0 of size 9 but only 1 byte left.
    body = b"\x02g\x00\x00\x00\x01\x02m\x00\x01\x00\x09\x00"
    with pytest.raises(DecodeError):
        m.codec("HeartbeatRequest", 4).decode(body)


def test_null_element_in_a_nullable_string_array_is_refused_both_ways():
    # DescribeConfigs v1: configuration_keys is a nullable []string; its elements are never null.
    codec = m.codec("DescribeConfigsRequest", 1)
    req = m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name="t", configuration_keys=["ab"])], include_synonyms=False)
    raw = codec.encode(req)
    assert codec.decode(raw)[0] == req
    element = raw.index(b"\x00\x02ab")
    with pytest.raises(DecodeError, match="configuration_keys"):
        codec.decode(raw[:element] + b"\xff\xff" + raw[element + 4:])
    req.resources[0].configuration_keys = None      # the array itself may be null
    assert codec.decode(codec.encode(req))[0] == req
    req.resources[0].configuration_keys = [None]
    with pytest.raises(ValueError, match="configuration_keys"):
        codec.encode(req)
