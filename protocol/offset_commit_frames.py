"""Whole OffsetCommit v8-v9 frames, read and written by hand: every consumer commits all the time.

A busy coordinator spends much of its CPU decoding commits into message objects (one per partition)
and encoding their answers. These functions go from the request frame straight to columns of the
partitions' fields, and from the error codes straight to the response frame, without the header
and message objects of the general codec (protocol/headers.py + protocol/messages.py), which stays
the reference: tests show both agree on every case this reader takes.

`read_request` only takes the common shape of the flexible versions (v8, v9; v9 only changes what
the coordinator answers): strings of up to 126 bytes, no tagged fields anywhere, metadata null or
empty on every partition (what consumers commit), nothing after the body. For anything else it
returns None, and the caller hands the frame to the general codec, which decodes it or says exactly
what is wrong with it.
"""
from __future__ import annotations

import struct
from itertools import repeat

API_KEY = 8
MIN_VERSION = 8  # the first flexible version (header v2, compact strings and arrays)
MAX_VERSION = 9  # v10 names topics by id: not read here

# size int32 (of what follows), api_key int16, api_version int16, correlation_id int32, then the
# length int16 of client_id (a nullable string, not compact, even in request header v2)
_REQUEST_HEAD = struct.Struct(">ihhih")
_INT32 = struct.Struct(">i")

# One partition of the common shape, in a fixed number of bytes:
_ENTRY_FORMAT = (
    "i"    # partition_index
    "q"    # committed_offset
    "i"    # committed_leader_epoch
    "B"    # committed_metadata: compact length + 1, 0 (null) or 1 (empty) in the common shape
    "B"    # the partition's tagged fields: 0 (none) in the common shape
)
_ENTRY_SIZE = struct.calcsize(">" + _ENTRY_FORMAT)
_FIELDS_PER_ENTRY = len(_ENTRY_FORMAT)
# A topic's partitions read with one unpack into one flat tuple, sliced into columns: no tuple per
# partition. One Struct per partition count (a client commits the same count again and again).
# Bounded: emptied when full.
_MAX_ENTRY_STRUCTS = 256
_entry_structs: dict[int, struct.Struct] = {}
_METADATA = (None, "")  # by committed_metadata's compact length + 1

# (name, partition indices, committed offsets, committed leader epochs, committed metadata), each a
# tuple with one item per partition, in request order
Topic = tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple["str | None", ...]]
# (api_version, group_id, generation_id_or_member_epoch, member_id, group_instance_id, topics)
Fields = tuple[int, str, int, str, "str | None", list[Topic]]


def read_request(frame: bytes) -> tuple[int, Fields] | None:
    """A whole OffsetCommit request frame (size prefix included) -> (correlation_id, fields), or None
    when it is not an OffsetCommit this reader takes (see the module docstring)."""
    if len(frame) < 14:
        return None
    size, key, version, correlation_id, n = _REQUEST_HEAD.unpack_from(frame, 0)
    if key != API_KEY or size != len(frame) - 4 or not MIN_VERSION <= version <= MAX_VERSION or n < -1:
        return None
    try:
        pos = 14
        if n > 0:
            frame[pos:pos + n].decode()  # client_id: unused here, but it must be UTF-8 (else: general path)
            pos += n
        if frame[pos]:  # the header's tagged fields
            return None
        group_id, pos = _string(frame, pos + 1)
        (generation_id,) = _INT32.unpack_from(frame, pos)
        member_id, pos = _string(frame, pos + 4)
        group_instance_id, pos = _string(frame, pos)
        count = frame[pos] - 1
        pos += 1
        if group_id is None or member_id is None or not 0 <= count < 127:
            return None
        topics = []
        for _ in range(count):
            name, pos = _string(frame, pos)
            partitions, pos = _count(frame, pos)
            end = pos + partitions * _ENTRY_SIZE
            if name is None or partitions < 0 or end >= len(frame):
                return None
            topic = _read_entries(frame, pos, partitions, name)
            if topic is None or frame[end]:  # an unusual partition, or the topic's tagged fields
                return None
            topics.append(topic)
            pos = end + 1
        if frame[pos] or pos + 1 != len(frame):  # the body's tagged fields, or bytes after the body
            return None
    except (_Unusual, struct.error, UnicodeDecodeError, IndexError):
        return None
    return correlation_id, (version, group_id, generation_id, member_id, group_instance_id, topics)


def _read_entries(frame: bytes, pos: int, partitions: int, name: str) -> Topic | None:
    if not partitions:
        return name, (), (), (), ()
    entries = _entry_structs.get(partitions)
    if entries is None:
        if len(_entry_structs) >= _MAX_ENTRY_STRUCTS:
            _entry_structs.clear()
        entries = _entry_structs[partitions] = struct.Struct(">" + _ENTRY_FORMAT * partitions)
    flat = entries.unpack_from(frame, pos)
    step = _FIELDS_PER_ENTRY
    lengths = flat[3::step]
    if max(lengths) > 1 or any(flat[4::step]):  # metadata with text, or tagged fields
        return None
    if min(lengths):
        metadata = ("",) * partitions  # the usual commit
    else:
        metadata = tuple(map(_METADATA.__getitem__, lengths))
    return name, flat[0::step], flat[1::step], flat[2::step], metadata


class _Unusual(Exception):
    """A shape read_request leaves to the general codec."""


def _string(frame: bytes, pos: int) -> tuple[str | None, int]:
    n = frame[pos] - 1  # compact: length + 1 (0: null); a single byte holds lengths up to 126
    if n < 0:
        return None, pos + 1
    if n >= 127:
        raise _Unusual
    return frame[pos + 1:pos + 1 + n].decode(), pos + 1 + n


def _count(frame: bytes, pos: int) -> tuple[int, int]:
    """A compact array's length (-1: null), an unsigned varint of length + 1 of up to two bytes."""
    first = frame[pos]
    if first < 0x80:
        return first - 1, pos + 1
    second = frame[pos + 1]
    if second >= 0x80:
        raise _Unusual
    return ((first & 0x7F) | (second << 7)) - 1, pos + 2


# Response frames: size int32 (of what follows), correlation_id int32, then the body: header tag
# section, throttle_time_ms int32, topics (compact array), body tag section.
_RESPONSE_ID = struct.Struct(">ii")
_PARTITION = struct.Struct(">ihB")  # partition_index, error_code, tag section
_NO_TAGS = b"\x00"
_BODY_HEAD = _NO_TAGS + _INT32.pack(0)  # header tag section, throttle_time_ms 0

# The answer to a commit that every partition accepted is the same body for the same topics and
# partitions, whatever the offsets: remembered by (error code, topics, partition indices). Bounded:
# emptied when full.
MAX_REMEMBERED = 1 << 12
_remembered: dict[tuple, bytes] = {}


def response_frame(version: int, correlation_id: int, topics: list[Topic],
                   errors: int | dict[tuple[str, int], int]) -> bytes:
    """The whole OffsetCommitResponse frame (size prefix included), throttle_time_ms 0, answering
    every partition of `topics` (the reader's; only names and indices are used), in order: with one
    error code for all, or by (topic name, partition index) from `errors`."""
    if version < MIN_VERSION:
        raise ValueError(f"OffsetCommitResponse v{version} is not written here")
    if isinstance(errors, dict):
        codes = set(errors.values())
        if len(codes) <= 1:  # what the general handler does too: then one code answers all
            errors = codes.pop() if codes else 0
    if isinstance(errors, dict):
        body = _body(topics, errors)
    else:
        key = (errors, *[(t[0], t[1]) for t in topics])
        body = _remembered.get(key)
        if body is None:
            body = _body(topics, errors)
            if len(_remembered) >= MAX_REMEMBERED:
                _remembered.clear()
            _remembered[key] = body
    return _RESPONSE_ID.pack(len(body) + 4, correlation_id) + body


def _body(topics: list[Topic], errors: int | dict[tuple[str, int], int]) -> bytes:
    out = [_BODY_HEAD, _uvarint(len(topics) + 1)]
    for topic in topics:
        name, indices = topic[0], topic[1]
        encoded = name.encode()
        out += (_uvarint(len(encoded) + 1), encoded, _uvarint(len(indices) + 1))
        if isinstance(errors, dict):
            codes = [errors[(name, index)] for index in indices]
        else:
            codes = repeat(errors)
        out += map(_PARTITION.pack, indices, codes, repeat(0))
        out.append(_NO_TAGS)
    out.append(_NO_TAGS)
    return b"".join(out)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
