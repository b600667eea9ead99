"""Arrays of flat structs are decoded with a guessed per-element layout (codegen.shaped_loop). Whatever
the lengths do from one element to the next, the result must equal field-by-field decoding: same
objects as kafka-python sees, same errors on truncated input."""
from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import DecodeError
from tests.protocol.reference import (
    from_kafka_python,
    kafka_python_decode,
    kafka_python_encode,
    to_kafka_python,
)

JoinMember = m.JoinGroupResponse.JoinGroupResponseMember
Partition = m.OffsetCommitRequest.OffsetCommitRequestPartition

# Per-element (string, nullable string, bytes) patterns that hit and miss the guessed layout.
PATTERNS = {
    "same": [("member-1", None, b"\x00\x01m")] * 8,
    "length_changes": [(f"member-{i}", None, b"m" * 3) for i in range(6, 14)],
    "null_then_present": [("m", None if i % 3 else "inst", b"") for i in range(9)],
    "every_length_differs": [("m" * i, "i" * (i % 2), b"b" * i) for i in range(12)],
    "non_ascii": [("ké", "é", b"\xff\xfe")] * 5,
    "long": [("x" * 130, None, b"y" * 200)] * 4 + [("x" * 131, None, b"y" * 200)] * 3,
    "one": [("member", None, b"")],
    "two": [("member", None, b"")] * 2,
}


def _join_response(pattern):
    return m.JoinGroupResponse(generation_id=3, protocol_name="range", leader="l", member_id="l", members=[
        JoinMember(member_id=a, group_instance_id=b, metadata=c) for a, b, c in pattern])


@pytest.mark.parametrize("version", [5, 6, 9])   # classic, flexible, latest
@pytest.mark.parametrize("pattern", list(PATTERNS), ids=list(PATTERNS))
def test_join_group_members_decode_as_kafka_python_does(pattern, version):
    name = "JoinGroupResponse"
    obj = _join_response(PATTERNS[pattern])
    codec = m.codec(name, version)
    data = codec.encode(obj)
    assert data == kafka_python_encode(to_kafka_python(obj, name, version), version)
    decoded, end = codec.decode(data)
    assert end == len(data)
    assert decoded == from_kafka_python(kafka_python_decode(name, data, version), name, version)
    assert decoded == obj


def test_offset_commit_partitions_with_changing_metadata_and_unknown_tags():
    partitions = [Partition(partition_index=p, committed_offset=10 * p, committed_metadata=md)
                  for p, md in enumerate(["", "", "", "x", "x", None, None, "", "é" * 70, ""])]
    partitions[4]._unknown_tagged_fields = {7: b"kept"}   # a tag section that breaks the guess
    obj = m.OffsetCommitRequest(group_id="g", member_id="m", topics=[
        m.OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=partitions)])
    codec = m.codec("OffsetCommitRequest", 8)
    data = codec.encode(obj)
    decoded, end = codec.decode(data)
    assert (decoded, end) == (obj, len(data))
    assert decoded.topics[0].partitions[4]._unknown_tagged_fields == {7: b"kept"}
    assert codec.encode(decoded) == data


@pytest.mark.parametrize(("name", "version"), [("JoinGroupResponse", 5), ("JoinGroupResponse", 6),
                                               ("OffsetCommitRequest", 8)])
def test_truncation_inside_a_guessed_element_is_a_decode_error(name, version):
    if name == "JoinGroupResponse":
        obj = _join_response(PATTERNS["same"])
    else:
        obj = m.OffsetCommitRequest(group_id="g", member_id="m", topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                Partition(partition_index=p, committed_metadata="md") for p in range(6)])])
    codec = m.codec(name, version)
    data = codec.encode(obj)
    for cut in range(len(data)):
        with pytest.raises(DecodeError) as info:
            codec.decode(data[:cut])
        assert 0 <= info.value.offset <= cut


def test_a_null_in_a_non_nullable_field_after_a_guess_is_refused():
    codec = m.codec("JoinGroupResponse", 5)
    data = bytearray(codec.encode(_join_response(PATTERNS["same"])))
    last = data.rindex(b"\x00\x08member-1")
    data[last:last + 2] = b"\xff\xff"             # the last member id becomes null
    with pytest.raises(DecodeError, match="member_id"):
        codec.decode(bytes(data))
