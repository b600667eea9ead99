"""Hand-encoded Kafka frames for the few requests a benchmark member sends.

Deliberately independent of protocol/: the load side must not share a bug (or a cost) with
the server it measures. Every request here is a flexible version, so the request header is
v2 (client id as a classic int16 string, then tagged fields) and the response header v1
(correlation id, then tagged fields). Layouts follow Kafka's message JSON schemas.
"""

from __future__ import annotations

import struct

# api keys and the versions we speak
JOIN_GROUP, JOIN_GROUP_V = 11, 7  # v4+: MEMBER_ID_REQUIRED (KIP-394); v6+ flexible
SYNC_GROUP, SYNC_GROUP_V = 14, 5  # v5: protocol type/name
HEARTBEAT, HEARTBEAT_V = 12, 4  # v4: flexible
LEAVE_GROUP, LEAVE_GROUP_V = 13, 4  # v3+: batch of members
OFFSET_COMMIT, OFFSET_COMMIT_V = 8, 8  # v8: flexible
OFFSET_FETCH, OFFSET_FETCH_V = 9, 7  # v7: flexible, one group, require_stable
FIND_COORDINATOR, FIND_COORDINATOR_V = 10, 3  # v3: flexible, one key
CREATE_TOPICS, CREATE_TOPICS_V = 19, 5  # v5: flexible

# error codes the member state machine reacts to
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HDR = struct.Struct(">ihhi")  # size, api key, api version, correlation id
CLIENT_ID = b"kcoord-bench"
_TAGS = b"\x00"  # an empty tagged-field section


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstr(s: str | None) -> bytes:
    """Compact (nullable) string: length + 1 as an unsigned varint, 0 for null."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def cbytes(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def carray(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def frame(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    """Size-prefixed request: header v2 then body. The C generator patches bytes 8..11."""
    rest = _I16.pack(len(CLIENT_ID)) + CLIENT_ID + _TAGS + body
    return _HDR.pack(8 + len(rest), api_key, version, corr) + rest


# ---- request bodies ----


def join_group(
    group: str,
    member_id: str,
    session_ms: int,
    rebalance_ms: int,
    protocols: list[tuple[str, bytes]],
    protocol_type: str = "consumer",
) -> bytes:
    protos = [cstr(name) + cbytes(meta) + _TAGS for name, meta in protocols]
    return (
        cstr(group)
        + _I32.pack(session_ms)
        + _I32.pack(rebalance_ms)
        + cstr(member_id)
        + cstr(None)
        + cstr(protocol_type)
        + carray(protos)
        + _TAGS
    )


def sync_group(
    group: str,
    generation: int,
    member_id: str,
    protocol_type: str,
    protocol_name: str,
    assignments: dict[str, bytes],
) -> bytes:
    items = [cstr(mid) + cbytes(a) + _TAGS for mid, a in assignments.items()]
    return (
        cstr(group)
        + _I32.pack(generation)
        + cstr(member_id)
        + cstr(None)
        + cstr(protocol_type)
        + cstr(protocol_name)
        + carray(items)
        + _TAGS
    )


def heartbeat(group: str, generation: int, member_id: str) -> bytes:
    return cstr(group) + _I32.pack(generation) + cstr(member_id) + cstr(None) + _TAGS


def leave_group(group: str, member_ids: list[str]) -> bytes:
    return cstr(group) + carray([cstr(m) + cstr(None) + _TAGS for m in member_ids]) + _TAGS


def offset_commit(
    group: str, generation: int, member_id: str, topic: str, offsets: list[tuple[int, int]]
) -> bytes:
    parts = [_I32.pack(p) + _I64.pack(o) + _I32.pack(-1) + cstr("") + _TAGS for p, o in offsets]
    return (
        cstr(group)
        + _I32.pack(generation)
        + cstr(member_id)
        + cstr(None)
        + carray([cstr(topic) + carray(parts) + _TAGS])
        + _TAGS
    )


def offset_fetch(group: str, topic: str | None, partitions: list[int] = ()) -> bytes:
    """topic None: all topics of the group (null array)."""
    if topic is None:
        topics = b"\x00"
    else:
        topics = carray([cstr(topic) + carray([_I32.pack(p) for p in partitions]) + _TAGS])
    return cstr(group) + topics + b"\x00" + _TAGS  # require_stable = false


def find_coordinator(key: str) -> bytes:
    return cstr(key) + _I8.pack(0) + _TAGS


def create_topic(name: str, partitions: int) -> bytes:
    topic = cstr(name) + _I32.pack(partitions) + _I16.pack(1) + carray([]) + carray([]) + _TAGS
    return carray([topic]) + _I32.pack(30_000) + b"\x00" + _TAGS  # timeout, validate_only=false


# ---- responses: just the fields a member needs ----


class Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf, pos: int = 0):
        self.buf, self.pos = buf, pos

    def i16(self) -> int:
        v = _I16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self) -> int:
        v = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def i64(self) -> int:
        v = _I64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def uvarint(self) -> int:
        shift = n = 0
        while True:
            b = self.buf[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n
            shift += 7

    def cbytes(self) -> bytes | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        v = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return v

    def cstr(self) -> str | None:
        b = self.cbytes()
        return None if b is None else b.decode()

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def body_reader(payload) -> Reader:
    """Skip response header v1 (correlation id, tagged fields)."""
    r = Reader(payload, 4)
    r.tags()
    return r


def parse_join_group(payload) -> dict:
    r = body_reader(payload)
    r.i32()  # throttle
    out = {
        "error": r.i16(),
        "generation": r.i32(),
        "protocol_type": r.cstr(),
        "protocol_name": r.cstr(),
        "leader": r.cstr(),
        "member_id": r.cstr(),
    }
    members = []
    for _ in range(r.uvarint() - 1):
        mid = r.cstr()
        r.cstr()  # group instance id
        r.cbytes()
        r.tags()
        members.append(mid)
    out["members"] = members
    return out


def parse_sync_group(payload) -> int:
    r = body_reader(payload)
    r.i32()
    return r.i16()


def parse_heartbeat(payload) -> int:
    r = body_reader(payload)
    r.i32()
    return r.i16()


def parse_leave_group(payload) -> int:
    return parse_heartbeat(payload)


def parse_offset_commit(payload) -> list[int]:
    r = body_reader(payload)
    r.i32()
    errors = []
    for _ in range(r.uvarint() - 1):
        r.cstr()
        for _ in range(r.uvarint() - 1):
            r.i32()
            errors.append(r.i16())
            r.tags()
        r.tags()
    return errors


def parse_offset_fetch(payload) -> tuple[int, dict[tuple[str, int], int], list[int]]:
    """(group error, {(topic, partition): offset}, partition errors)."""
    r = body_reader(payload)
    r.i32()
    offsets, errors = {}, []
    for _ in range(r.uvarint() - 1):
        topic = r.cstr()
        for _ in range(r.uvarint() - 1):
            p, off = r.i32(), r.i64()
            r.i32()
            r.cstr()
            errors.append(r.i16())
            r.tags()
            offsets[(topic, p)] = off
        r.tags()
    return r.i16(), offsets, errors


def parse_find_coordinator(payload) -> int:
    r = body_reader(payload)
    r.i32()
    return r.i16()


# Fixed answer used by the ceiling servers: a HeartbeatResponse v4 (correlation id patched in).
HEARTBEAT_OK = _I32.pack(0) + _TAGS + _I32.pack(0) + _I16.pack(0) + _TAGS
HEARTBEAT_ERR_OFFSET = 4 + 1 + 4  # correlation id, header tags, throttle


def commit_err_offset(topic: str) -> int:
    """Where the first partition's error code sits in an OffsetCommitResponse v8."""
    return 4 + 1 + 4 + 1 + len(cstr(topic)) + 1 + 4
