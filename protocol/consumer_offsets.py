"""The `__consumer_offsets` record formats, and which partition of that topic a group lives in.

Every key and value is an int16 version followed by a struct (Kafka's `CoordinatorRecordSerde`).
The key version doubles as the record type:

    key v0, v1  OffsetCommitKey    group STRING, topic STRING, partition INT32   (we write v1)
    key v2      GroupMetadataKey   group STRING
    key v3-v8   KIP-848 consumer group records: decode_key returns None; kcoord.coordinator.consumer.records
                decodes them (their values are flexible versions of Kafka's JSON definitions)
    key v9+     share-group records: not ours, decode_key returns None so a loader skips them

OffsetCommitValue (we write v3, or v1 when an expire timestamp is set; we read v0-v4):
    v0, v2  offset INT64, metadata STRING, commit_timestamp INT64
    v1      offset INT64, metadata STRING, commit_timestamp INT64, expire_timestamp INT64
    v3      offset INT64, leader_epoch INT32, metadata STRING, commit_timestamp INT64
    v4      as v3 but flexible (compact string, tagged fields; tag 0 = TopicId uuid)

GroupMetadataValue (we write v3; we read v0-v3):
    protocol_type STRING, generation INT32, protocol NULLABLE_STRING, leader NULLABLE_STRING,
    current_state_timestamp INT64 (v2+), members ARRAY of
        member_id STRING, group_instance_id NULLABLE_STRING (v3+), client_id STRING, client_host STRING,
        rebalance_timeout INT32 (v1+), session_timeout INT32, subscription BYTES, assignment BYTES

A tombstone (delete) is a null value. Decoders raise only DecodeError. Decoding offsets is on the
load path (a coordinator replays every record of its partitions), so the common layouts are read
with one precompiled struct call per fixed run of fields.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from kcoord.protocol.errors import DecodeError

OFFSETS_TOPIC = "__consumer_offsets"  # the one name of the topic (coordinator, broker, analytics, bench)
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
# Value heads: version + the fixed fields before the metadata string, in one call.
_V3_HEAD = struct.Struct(">hqih")   # version, offset, leader_epoch, metadata length
_V0_HEAD = struct.Struct(">hqh")    # version, offset, metadata length (v0, v1, v2)
_V1_TAIL = struct.Struct(">qq")     # commit_timestamp, expire_timestamp
_V3_NO_METADATA = struct.Struct(">hqihq")  # version 3, offset, leader_epoch, metadata length 0, commit_ts
pack_offset_commit_value_v3_no_metadata = _V3_NO_METADATA.pack  # for the record factory's hot loop
_new_tuple = tuple.__new__
_MEMBER_TIMEOUTS = struct.Struct(">ii")  # rebalance_timeout, session_timeout (v1+)


@dataclass(slots=True, frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(slots=True, frozen=True)
class GroupMetadataKey:
    group: str


class OffsetCommitValue(NamedTuple):
    """Immutable, and a tuple so that the loader can build a million of them cheaply."""
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1     # -1 = none; only OffsetCommitValue v1 carries it
    topic_id: bytes | None = None  # v4 tagged field 0, read only


@dataclass(slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadataValue] = field(default_factory=list)


# ---------------------------------------------------------------- group id -> partition

def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, 32-bit wrapping."""
    data = s.encode("utf-16-be")
    h = 0
    for (unit,) in _U16.iter_unpack(data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for(group_id: str, n: int = 50) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % n`, where abs(Integer.MIN_VALUE) is 0, not negative."""
    h = java_string_hash(group_id)
    return (0 if h == -0x80000000 else abs(h)) % n


# ---------------------------------------------------------------- primitives

def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ValueError("string longer than 32767 bytes")
    return _I16.pack(len(b)) + b


def _nullable_string(s: str | None) -> bytes:
    return _I16.pack(-1) if s is None else _string(s)


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + bytes(b)


class _Reader:
    """Cursor over one key or value; every short read becomes a DecodeError."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf, what: str, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.what = what

    def fail(self, reason: str) -> DecodeError:
        return DecodeError(reason, api=self.what, offset=self.pos)

    def unpack(self, st: struct.Struct):
        try:
            out = st.unpack_from(self.buf, self.pos)
        except struct.error:
            raise self.fail("truncated") from None
        self.pos += st.size
        return out

    def raw(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise self.fail("truncated")
        out = bytes(self.buf[self.pos:end])
        self.pos = end
        return out

    def string(self) -> str:
        (n,) = self.unpack(_I16)
        if n < 0:
            raise self.fail("null where a string is required")
        return self.text(n)

    def nullable_string(self) -> str | None:
        (n,) = self.unpack(_I16)
        return None if n < 0 else self.text(n)

    def text(self, n: int) -> str:
        try:
            return self.raw(n).decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("invalid UTF-8") from None

    def bytes_(self) -> bytes:
        (n,) = self.unpack(_I32)
        return b"" if n < 0 else self.raw(n)

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.buf) or shift > 28:
                raise self.fail("bad varint")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def end(self) -> None:
        if self.pos != len(self.buf):
            raise self.fail(f"{len(self.buf) - self.pos} trailing bytes")


# ---------------------------------------------------------------- keys

@lru_cache(maxsize=16384)
def offset_commit_key_prefix(group: str, topic: str) -> bytes:
    """An OffsetCommitKey v1 up to its partition. A commit repeats one group and a few topics over
    many partitions (and again on the next commit), so the prefix is encoded once and cached."""
    return _I16.pack(OFFSET_COMMIT_KEY_VERSION) + _string(group) + _string(topic)


@lru_cache(maxsize=1 << 15)
def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    # Cached too: a group commits the same partitions over and over.
    return offset_commit_key_prefix(group, topic) + _I32.pack(partition)


def encode_group_metadata_key(group: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + _string(group)


def split_offset_commit_key(key: bytes) -> tuple[bytes, str, int]:
    """Fast path for the loader: (raw UTF-8 group, topic, partition) of an OffsetCommitKey v0/v1."""
    try:
        (glen,) = _I16.unpack_from(key, 2)
        gend = 4 + glen
        (tlen,) = _I16.unpack_from(key, gend)
        tend = gend + 2 + tlen
        (partition,) = _I32.unpack_from(key, tend)
        if glen < 0 or tlen < 0 or tend + 4 != len(key):
            raise DecodeError("malformed OffsetCommitKey", api="OffsetCommitKey", offset=0)
        return key[4:gend], key[gend + 2:tend].decode("utf-8"), partition
    except (struct.error, UnicodeDecodeError):
        raise DecodeError("malformed OffsetCommitKey", api="OffsetCommitKey", offset=0) from None


def decode_key(buf) -> OffsetCommitKey | GroupMetadataKey | None:
    """Decode a key; None for record types that are not the classic group's (KIP-848, share)."""
    r = _Reader(buf, "ConsumerOffsetsKey")
    (version,) = r.unpack(_I16)
    if version in (0, 1):
        group = r.string()
        topic = r.string()
        (partition,) = r.unpack(_I32)
        r.end()
        return OffsetCommitKey(group, topic, partition)
    if version == 2:
        group = r.string()
        r.end()
        return GroupMetadataKey(group)
    if version < 0:
        raise r.fail(f"negative key version {version}")
    return None


# ---------------------------------------------------------------- OffsetCommitValue

def encode_offset_commit_value(v: OffsetCommitValue) -> bytes:
    if not v.metadata and v.expire_timestamp < 0:
        # What consumers commit nearly always: v3 without metadata, one struct call.
        return _V3_NO_METADATA.pack(3, v.offset, v.leader_epoch, 0, v.commit_timestamp)
    meta = _string(v.metadata)
    if v.expire_timestamp >= 0:
        return _V0_HEAD.pack(1, v.offset, len(meta) - 2) + meta[2:] + _V1_TAIL.pack(
            v.commit_timestamp, v.expire_timestamp)
    return _V3_HEAD.pack(3, v.offset, v.leader_epoch, len(meta) - 2) + meta[2:] + _I64.pack(v.commit_timestamp)


def decode_offset_commit_value(buf) -> OffsetCommitValue:
    # Fast paths: v3 (what Kafka and we write), checked exactly; anything else takes the general road.
    if len(buf) == 24:
        version, offset, epoch, n, commit_ts = _V3_NO_METADATA.unpack(buf)
        if version == 3 and n == 0:
            return _new_tuple(OffsetCommitValue, (offset, "", commit_ts, epoch, -1, None))
    if len(buf) >= 24 and buf[0] == 0 and buf[1] == 3:
        _, offset, epoch, n = _V3_HEAD.unpack_from(buf)
        end = 16 + n
        if n >= 0 and len(buf) == end + 8:
            try:
                metadata = buf[16:end].decode("utf-8") if n else ""
            except UnicodeDecodeError:
                raise DecodeError("invalid UTF-8", api="OffsetCommitValue", offset=16) from None
            return OffsetCommitValue(offset, metadata, _I64.unpack_from(buf, end)[0], epoch)
    return _decode_offset_commit_value_general(buf)


def _decode_offset_commit_value_general(buf) -> OffsetCommitValue:
    r = _Reader(buf, "OffsetCommitValue")
    (version,) = r.unpack(_I16)
    r.pos = 0  # the heads below re-read the version in the same struct call
    if version == 3:
        _, offset, epoch, n = r.unpack(_V3_HEAD)
        metadata = r.text(n) if n >= 0 else ""
        (commit_ts,) = r.unpack(_I64)
        r.end()
        return OffsetCommitValue(offset, metadata, commit_ts, epoch)
    if version in (0, 1, 2):
        _, offset, n = r.unpack(_V0_HEAD)
        metadata = r.text(n) if n >= 0 else ""
        expire = -1
        if version == 1:
            commit_ts, expire = r.unpack(_V1_TAIL)
        else:
            (commit_ts,) = r.unpack(_I64)
        r.end()
        return OffsetCommitValue(offset, metadata, commit_ts, -1, expire)
    if version == 4:
        return _decode_offset_commit_value_v4(r)
    raise DecodeError(f"unknown OffsetCommitValue version {version}", api="OffsetCommitValue", offset=0)


def _decode_offset_commit_value_v4(r: _Reader) -> OffsetCommitValue:
    r.pos = 2
    (offset,) = r.unpack(_I64)
    (epoch,) = r.unpack(_I32)
    n = r.uvarint() - 1
    metadata = r.text(n) if n >= 0 else ""
    (commit_ts,) = r.unpack(_I64)
    topic_id = None
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        size = r.uvarint()
        data = r.raw(size)
        if tag == 0:
            if size != 16:
                raise r.fail("TopicId tag is not 16 bytes")
            topic_id = data
    r.end()
    return OffsetCommitValue(offset, metadata, commit_ts, epoch, -1, topic_id)


# ---------------------------------------------------------------- GroupMetadataValue

def encode_group_metadata_value(v: GroupMetadataValue) -> bytes:
    out = [_I16.pack(GROUP_METADATA_VALUE_VERSION), _string(v.protocol_type), _I32.pack(v.generation),
           _nullable_string(v.protocol), _nullable_string(v.leader), _I64.pack(v.current_state_timestamp),
           _I32.pack(len(v.members))]
    for m in v.members:
        out += [_string(m.member_id), _nullable_string(m.group_instance_id), _string(m.client_id),
                _string(m.client_host), _MEMBER_TIMEOUTS.pack(m.rebalance_timeout, m.session_timeout),
                _bytes(m.subscription), _bytes(m.assignment)]
    return b"".join(out)


def decode_group_metadata_value(buf) -> GroupMetadataValue:
    r = _Reader(buf, "GroupMetadataValue")
    (version,) = r.unpack(_I16)
    if not 0 <= version <= 3:
        raise r.fail(f"unsupported GroupMetadataValue version {version}")
    protocol_type = r.string()
    (generation,) = r.unpack(_I32)
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.unpack(_I64)[0] if version >= 2 else -1
    (count,) = r.unpack(_I32)
    members = []
    for _ in range(max(count, 0)):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        if version >= 1:
            rebalance_timeout, session_timeout = r.unpack(_MEMBER_TIMEOUTS)
        else:
            (session_timeout,) = r.unpack(_I32)
            rebalance_timeout = session_timeout
        members.append(MemberMetadataValue(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                           session_timeout, r.bytes_(), r.bytes_()))
    r.end()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)
