"""__consumer_offsets key/value formats and the group -> partition mapping (reference 3.2-3.4)."""
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.protocol.consumer_offsets import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hash,
    partition_for,
)
from kcoord.protocol.errors import DecodeError


@pytest.mark.parametrize("group,h,p", [
    ("", 0, 0), ("Hello", 69_609_650, 0), ("Welcome to Tutorialspoint.com", 1_186_874_997, 47),
    ("my-group", -1_906_497_762, 12), ("test-group", 627_841_412, 12), ("groupA", -1_237_460_574, 24),
    ("\U0001F600", 1_772_899, 49), ("polygenelubricants", -2_147_483_648, 0),
])
def test_java_hash_and_partition_vectors(group, h, p):
    assert java_string_hash(group) == h
    assert partition_for(group, 50) == p


def test_offset_commit_key_layout():
    key = encode_offset_commit_key("g", "t", 3)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    assert decode_key(b"\x00\x00\x00\x01g\x00\x01t\x00\x00\x00\x03") == OffsetCommitKey("g", "t", 3)  # v0
    assert decode_key(encode_group_metadata_key("g")) == GroupMetadataKey("g")
    assert decode_key(b"\x00\x05anything") is None  # KIP-848 records are skipped


def test_offset_commit_value_v3_layout_and_v1_when_expiring():
    v3 = encode_offset_commit_value(OffsetCommitValue(42, "m", 1000, 7))
    assert v3 == struct.pack(">hqih", 3, 42, 7, 1) + b"m" + struct.pack(">q", 1000)
    v1 = encode_offset_commit_value(OffsetCommitValue(42, "m", 1000, 7, expire_timestamp=5000))
    assert v1 == struct.pack(">hqh", 1, 42, 1) + b"m" + struct.pack(">qq", 1000, 5000)
    assert decode_offset_commit_value(v1) == OffsetCommitValue(42, "m", 1000, -1, 5000)
    assert decode_offset_commit_value(v3) == OffsetCommitValue(42, "m", 1000, 7)


def test_offset_commit_value_v0_v2_v4():
    for version in (0, 2):
        raw = struct.pack(">hqh", version, 9, 0) + struct.pack(">q", 77)
        assert decode_offset_commit_value(raw) == OffsetCommitValue(9, "", 77)
    topic_id = bytes(range(16))
    v4 = (struct.pack(">hqi", 4, 9, 2) + b"\x03ab" + struct.pack(">q", 77)
          + b"\x01" + b"\x00" + b"\x10" + topic_id)
    assert decode_offset_commit_value(v4) == OffsetCommitValue(9, "ab", 77, 2, -1, topic_id)
    v4_no_tags = struct.pack(">hqi", 4, 9, 2) + b"\x01" + struct.pack(">q", 77) + b"\x00"
    assert decode_offset_commit_value(v4_no_tags).topic_id is None


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x00\x03\x00", b"\x00\x09" + b"\x00" * 30,
                                 encode_offset_commit_value(OffsetCommitValue(1, "x", 2))[:-1],
                                 encode_offset_commit_value(OffsetCommitValue(1, "x", 2)) + b"\x00"])
def test_bad_offset_values_raise_decode_error(raw):
    with pytest.raises(DecodeError):
        decode_offset_commit_value(raw)


def test_group_metadata_value_v3_roundtrip_and_older_versions():
    v = GroupMetadataValue("consumer", 5, "range", "m1", 123, [
        MemberMetadataValue("m1", "inst", "c", "/h", 60000, 10000, b"sub", b"asg"),
        MemberMetadataValue("m2", None, "c2", "/h2", 30000, 6000, b"", b"")])
    raw = encode_group_metadata_value(v)
    assert raw[:2] == b"\x00\x03"
    assert decode_group_metadata_value(raw) == v
    empty = GroupMetadataValue("", 0, None, None, 5, [])
    assert decode_group_metadata_value(encode_group_metadata_value(empty)) == empty
    # v0: no rebalance timeout, no state timestamp, no instance id
    v0 = (b"\x00\x00" + b"\x00\x08consumer" + struct.pack(">i", 2) + b"\x00\x05range" + b"\x00\x02m1"
          + struct.pack(">i", 1) + b"\x00\x02m1" + b"\x00\x01c" + b"\x00\x02/h" + struct.pack(">i", 10000)
          + struct.pack(">i", 1) + b"s" + struct.pack(">i", 1) + b"a")
    got = decode_group_metadata_value(v0)
    assert got == GroupMetadataValue("consumer", 2, "range", "m1", -1,
                                     [MemberMetadataValue("m1", None, "c", "/h", 10000, 10000, b"s", b"a")])


@given(st.text(max_size=40), st.text(max_size=40), st.integers(-2**31, 2**31 - 1),
       st.integers(-1, 2**63 - 1), st.integers(-2**31, 2**31 - 1), st.text(max_size=100),
       st.integers(-1, 2**62), st.one_of(st.just(-1), st.integers(0, 2**62)))
def test_offsets_roundtrip(group, topic, partition, offset, epoch, metadata, ts, expire):
    assert decode_key(encode_offset_commit_key(group, topic, partition)) == OffsetCommitKey(group, topic, partition)
    v = OffsetCommitValue(offset, metadata, ts, epoch if expire < 0 else -1, expire)
    assert decode_offset_commit_value(encode_offset_commit_value(v)) == v


@given(st.binary(max_size=60))
def test_decoders_raise_only_decode_error(raw):
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        try:
            decode(raw)
        except DecodeError:
            pass


@given(st.integers(-1, 2**63 - 1), st.integers(-2**31, 2**31 - 1), st.text(max_size=20), st.integers(-1, 2**62))
def test_fast_value_decoder_agrees_with_the_general_one(offset, epoch, metadata, ts):
    from kcoord.protocol.consumer_offsets import _decode_offset_commit_value_general
    raw = encode_offset_commit_value(OffsetCommitValue(offset, metadata, ts, epoch))
    assert decode_offset_commit_value(raw) == _decode_offset_commit_value_general(raw)


member_values = st.builds(MemberMetadataValue, st.text(max_size=10), st.one_of(st.none(), st.text(max_size=5)),
                          st.text(max_size=5), st.text(max_size=5), st.integers(0, 2**31 - 1),
                          st.integers(0, 2**31 - 1), st.binary(max_size=10), st.binary(max_size=10))


@given(st.builds(GroupMetadataValue, st.text(max_size=10), st.integers(0, 2**31 - 1),
                 st.one_of(st.none(), st.text(max_size=5)), st.one_of(st.none(), st.text(max_size=5)),
                 st.integers(-1, 2**62), st.lists(member_values, max_size=3)))
def test_group_metadata_roundtrip(value):
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value


def test_split_offset_commit_key_matches_decode_key():
    from kcoord.protocol.consumer_offsets import split_offset_commit_key
    key = encode_offset_commit_key("grüppe", "tópic", 7)
    assert split_offset_commit_key(key) == ("grüppe".encode(), "tópic", 7)
    with pytest.raises(DecodeError):
        split_offset_commit_key(key + b"\x00")
