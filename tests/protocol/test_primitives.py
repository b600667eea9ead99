"""Varints and tagged-field sections against kafka-python's primitive codecs."""
from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.schemas.fields.codecs.types import UnsignedVarInt32, VarInt32, VarInt64

from kcoord.protocol import messages as m
from kcoord.protocol import primitives as p
from kcoord.protocol.errors import DecodeError


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_matches_kafka_python(n):
    raw = p.uvarint_bytes(n)
    assert raw == UnsignedVarInt32.encode(n)
    assert p.read_uvarint(raw + b"tail", 0) == (n, len(raw))


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**31), 2**31 - 1))
def test_zigzag_varint_matches_kafka_python(n):
    raw = p.varint_bytes(n)
    assert raw == VarInt32.encode(n)
    assert p.read_varint(raw, 0) == (n, len(raw))


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_zigzag_varlong_matches_kafka_python(n):
    raw = p.varlong_bytes(n)
    assert raw == VarInt64.encode(n)
    assert VarInt64.decode(io.BytesIO(raw)) == n
    assert p.read_varlong(raw, 0) == (n, len(raw))


@pytest.mark.parametrize("raw", [b"", b"\x80", b"\xff\xff"])
def test_truncated_varint(raw):
    with pytest.raises(DecodeError, match="truncated"):
        p.read_uvarint(raw, 0)


def test_varint_longer_than_five_bytes():
    with pytest.raises(DecodeError, match="too long"):
        p.read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)


def test_compact_length_is_n_plus_one():
    assert p.compact_length(0) == b"\x01"
    assert p.compact_length(127) == b"\x80\x01"


def test_tag_section_is_sorted_by_tag():
    raw = p.encode_tag_section([(1, b"b")], {0: b"a", 7: b""})
    assert raw == b"\x03" + b"\x00\x01a" + b"\x01\x01b" + b"\x07\x00"
    assert p.skip_tag_section(raw + b"x", 0) == len(raw)


def test_unknown_tagged_fields_are_kept_and_re_emitted():
    codec = m.codec("HeartbeatRequest", 4)
    plain = codec.encode(m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m"))
    assert plain.endswith(b"\x00")
    with_tags = plain[:-1] + b"\x02" + b"\x05\x02hi" + b"\x09\x00"
    obj, end = codec.decode(with_tags)
    assert end == len(with_tags)
    assert obj._unknown_tagged_fields == {5: b"hi", 9: b""}
    assert codec.encode(obj) == with_tags
    assert "_unknown_tagged_fields" in repr(obj)
    assert obj != m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")


def test_unknown_tags_interleave_with_known_ones_in_tag_order():
    # FetchRequest v12 top level: ClusterId is tag 0 (v12+); an unknown tag 3 must follow it.
    codec = m.codec("FetchRequest", 12)
    req = m.FetchRequest(cluster_id="c", _unknown_tagged_fields={3: b"z"})
    raw = codec.encode(req)
    assert raw.endswith(b"\x02\x00\x02\x02c\x03\x01z")
    assert codec.decode(raw)[0] == req


def test_tagged_field_at_default_is_not_written():
    codec = m.codec("FetchResponse", 12)
    part = m.FetchResponse.PartitionData(partition_index=1,
                                         current_leader=m.FetchResponse.LeaderIdAndEpoch())
    with_default = codec.encode(m.FetchResponse(responses=[
        m.FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])]))
    part.current_leader = None
    assert with_default == codec.encode(m.FetchResponse(responses=[
        m.FetchResponse.FetchableTopicResponse(topic="t", partitions=[part])]))


def test_string_cache_stays_bounded_and_encodes_like_the_slow_path(monkeypatch):
    monkeypatch.setattr(p, "STRING_CACHE_SIZE", 8)
    p.STRINGS16.clear()
    for i in range(50):
        s = f"member-{i}-é"
        assert p.string16(s, "member_id", 5) == p.INT16.pack(len(s.encode())) + s.encode()
        assert len(p.STRINGS16) <= 8
    long = "x" * (p.STRING_CACHE_MAX_CHARS + 1)
    assert p.string_compact(long, "f", 9) == p.compact_length(len(long)) + long.encode()
    assert long not in p.STRINGS_COMPACT


def test_string_cache_miss_path_refuses_none_for_a_non_nullable_field():
    with pytest.raises(ValueError, match="member_id"):
        p.string_compact(None, "member_id", 4)
