"""Whole OffsetCommit v2-v9 frames, read and written by hand: every consumer commits all the time.

A busy coordinator spends much of its CPU decoding commits into message objects (one per partition)
and encoding their answers. These functions go from the request frame straight to columns of the
partitions' fields, and from the error codes straight to the response frame, without the header
and message objects of the general codec (protocol/headers.py + protocol/messages.py), which stays
the reference: tests show both agree on every case this reader takes.

`read_request` only takes the common shape: metadata null or empty on every partition (what
consumers commit), so that every partition takes the same number of bytes; at most MAX_PARTITIONS
partitions per topic; in the flexible versions
(v8+) also strings of up to 126 bytes and no tagged fields anywhere; nothing after the body. For
anything else it returns None, and the caller hands the frame to the general codec, which decodes it
or says exactly what is wrong with it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from itertools import repeat

from protocol.frame_fields import Unusual, compact_string, group_member, skip_request_header, string
from protocol.primitives import uvarint_bytes

API_KEY = 8
MIN_VERSION = 2  # v0-v1 were removed in Kafka 4.0 (KIP-896)
MAX_VERSION = 9  # v10 names topics by id: not read here
FIRST_FLEXIBLE_VERSION = 8  # header v2, compact strings and arrays, tagged fields

# size int32 (of what follows), api_key int16, api_version int16, correlation_id int32, then the
# length int16 of client_id (a nullable string, not compact, even in request header v2)
_REQUEST_HEAD = struct.Struct(">ihhih")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True, eq=False)
class _Entries:
    """How the partitions of one version are laid out when each takes the same number of bytes."""
    format: str           # struct codes of one partition
    epoch: int | None     # committed_leader_epoch's place in it (None: before v6, the field is absent)
    length: int           # committed_metadata's length's place: null or empty (not text) in the common shape
    tags: int | None      # the tag section's place (flexible versions): 0 (none) in the common shape
    metadata: dict[int, str | None]  # committed_metadata by its length field, for the lengths taken
    empty: int            # the length field of empty metadata (the usual)
    size: int = 0         # bytes of one partition (derived)
    fields: int = 0       # values of one partition (derived)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", struct.calcsize(">" + self.format))
        object.__setattr__(self, "fields", len(self.format))


_ENTRIES_V2 = _Entries(
    "i"    # partition_index
    "q"    # committed_offset
    "h",   # committed_metadata's length: -1 null, 0 empty
    None, 2, None, {-1: None, 0: ""}, 0)
_ENTRIES_V6 = _Entries(
    "i"    # partition_index
    "q"    # committed_offset
    "i"    # committed_leader_epoch (KIP-320)
    "h",   # committed_metadata's length: -1 null, 0 empty
    2, 3, None, {-1: None, 0: ""}, 0)
_ENTRIES_V8 = _Entries(
    "i"    # partition_index
    "q"    # committed_offset
    "i"    # committed_leader_epoch
    "B"    # committed_metadata's compact length + 1: 0 null, 1 empty
    "B",   # the partition's tag section
    2, 3, 4, {0: None, 1: ""}, 1)

# A topic's partitions are read with one unpack into one flat tuple, sliced into columns: no tuple per
# partition. One Struct per (layout, partition count): a client commits the same count again and
# again. Bounded: emptied when full, and no Struct for more partitions than MAX_PARTITIONS (its size
# grows with the count).
MAX_PARTITIONS = 2048
_MAX_ENTRY_STRUCTS = 256
_entry_structs: dict[tuple[str, int], struct.Struct] = {}

# (name, partition indices, committed offsets, committed leader epochs, committed metadata), each a
# tuple with one item per partition, in request order (epochs -1 before v6)
Topic = tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple["str | None", ...]]
# (api_version, group_id, generation_id_or_member_epoch, member_id, group_instance_id (None before v7),
#  retention_time_ms (-1 after v4), topics)
Fields = tuple[int, str, int, str, "str | None", int, list[Topic]]


def read_request(frame: bytes) -> tuple[int, Fields] | None:
    """A whole OffsetCommit request frame (size prefix included) -> (correlation_id, fields), or None
    when it is not an OffsetCommit this reader takes (see the module docstring)."""
    if len(frame) < 14:
        return None
    size, key, version, correlation_id, n = _REQUEST_HEAD.unpack_from(frame, 0)
    if key != API_KEY or size != len(frame) - 4 or not MIN_VERSION <= version <= MAX_VERSION or n < -1:
        return None
    flexible = version >= FIRST_FLEXIBLE_VERSION
    read, count_at = (compact_string, _compact_count) if flexible else (string, _count)
    entries = _ENTRIES_V8 if flexible else _ENTRIES_V6 if version >= 6 else _ENTRIES_V2
    try:
        pos = skip_request_header(frame, n, flexible)
        group_id, generation_id, member_id, pos = group_member(frame, pos, read)
        group_instance_id = None
        if version >= 7:
            group_instance_id, pos = read(frame, pos)
        retention_time_ms = -1
        if version <= 4:
            (retention_time_ms,) = _INT64.unpack_from(frame, pos)
            pos += 8
        count, pos = count_at(frame, pos)
        if group_id is None or member_id is None or not 0 <= count <= len(frame):
            return None
        topics = []
        for _ in range(count):
            name, pos = read(frame, pos)
            partitions, pos = count_at(frame, pos)
            end = pos + partitions * entries.size
            if name is None or not 0 <= partitions <= MAX_PARTITIONS or end > len(frame):
                return None
            topic = _read_entries(frame, pos, partitions, name, entries)
            if topic is None:
                return None
            topics.append(topic)
            pos = end
            if flexible:
                if frame[pos]:  # the topic's tagged fields
                    return None
                pos += 1
        if flexible:
            if frame[pos]:  # the body's tagged fields
                return None
            pos += 1
        if pos != len(frame):  # bytes after the body
            return None
    except (Unusual, struct.error, UnicodeDecodeError, IndexError):
        return None
    return correlation_id, (version, group_id, generation_id, member_id, group_instance_id, retention_time_ms,
                            topics)


def _read_entries(frame: bytes, pos: int, partitions: int, name: str, entries: _Entries) -> Topic | None:
    if not partitions:
        return name, (), (), (), ()
    layout = _entry_structs.get((entries.format, partitions))
    if layout is None:
        if len(_entry_structs) >= _MAX_ENTRY_STRUCTS:
            _entry_structs.clear()
        layout = _entry_structs[entries.format, partitions] = struct.Struct(">" + entries.format * partitions)
    flat = layout.unpack_from(frame, pos)
    step = entries.fields
    # Whole columns compared with tuples of the expected values: far cheaper than min/max/any.
    lengths = flat[entries.length::step]
    if lengths == (entries.empty,) * partitions:
        texts = ("",) * partitions  # the usual commit
    elif entries.metadata.keys() >= set(lengths):
        texts = tuple(map(entries.metadata.__getitem__, lengths))
    else:  # metadata with text (or a bad length)
        return None
    if entries.tags is not None and flat[entries.tags::step] != (0,) * partitions:  # tagged fields
        return None
    epochs = flat[entries.epoch::step] if entries.epoch is not None else (-1,) * partitions
    return name, flat[0::step], flat[1::step], epochs, texts


def _count(frame: bytes, pos: int) -> tuple[int, int]:
    """An array's length (-1: null)."""
    return _INT32.unpack_from(frame, pos)[0], pos + 4


def _compact_count(frame: bytes, pos: int) -> tuple[int, int]:
    """A compact array's length (-1: null), an unsigned varint of length + 1 of up to two bytes."""
    first = frame[pos]
    if first < 0x80:
        return first - 1, pos + 1
    second = frame[pos + 1]
    if second >= 0x80:
        raise Unusual
    return ((first & 0x7F) | (second << 7)) - 1, pos + 2


# Response frames: size int32 (of what follows), correlation_id int32, then the body:
#   v2:     topics (array)
#   v3-v7:  throttle_time_ms int32, topics (array)
#   v8+:    header tag section, throttle_time_ms int32, topics (compact array), body tag section
# A topic is its name then its partitions: partition_index int32, error_code int16 (+ tag section in
# v8+), then (v8+) the topic's tag section.
_RESPONSE_ID = struct.Struct(">ii")
_PARTITION = struct.Struct(">ih")
_PARTITION_V8 = struct.Struct(">ihB")
_NO_TAGS = b"\x00"
_NO_THROTTLE = _INT32.pack(0)

# The answer to a commit that every partition accepted is the same body for the same topics and
# partitions, whatever the offsets: remembered by (body layout, error code, topics, partition indices).
# Bounded: emptied when full.
MAX_REMEMBERED = 1 << 12
_remembered: dict[tuple, bytes] = {}


def response_frame(version: int, correlation_id: int, topics: list[Topic],
                   errors: int | dict[tuple[str, int], int]) -> bytes:
    """The whole OffsetCommitResponse frame (size prefix included), throttle_time_ms 0, answering
    every partition of `topics` (the reader's; only names and indices are used), in order: with one
    error code for all, or by (topic name, partition index) from `errors`."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"OffsetCommitResponse v{version} is not written here")
    layout = 2 if version >= FIRST_FLEXIBLE_VERSION else 1 if version >= 3 else 0
    if isinstance(errors, dict):
        codes = set(errors.values())
        if len(codes) <= 1:  # what the general handler does too: then one code answers all
            errors = codes.pop() if codes else 0
    if isinstance(errors, dict):
        body = _body(layout, topics, errors)
    else:
        key = (layout, errors, *[(t[0], t[1]) for t in topics])
        body = _remembered.get(key)
        if body is None:
            body = _body(layout, topics, errors)
            if len(_remembered) >= MAX_REMEMBERED:
                _remembered.clear()
            _remembered[key] = body
    return _RESPONSE_ID.pack(len(body) + 4, correlation_id) + body


def _body(layout: int, topics: list[Topic], errors: int | dict[tuple[str, int], int]) -> bytes:
    flexible = layout == 2
    out = [_NO_TAGS + _NO_THROTTLE] if flexible else [_NO_THROTTLE] if layout == 1 else []
    out.append(uvarint_bytes(len(topics) + 1) if flexible else _INT32.pack(len(topics)))
    for topic in topics:
        name, indices = topic[0], topic[1]
        encoded = name.encode()
        if flexible:
            out += (uvarint_bytes(len(encoded) + 1), encoded, uvarint_bytes(len(indices) + 1))
        else:
            out += (_INT16.pack(len(encoded)), encoded, _INT32.pack(len(indices)))
        if isinstance(errors, dict):
            codes = [errors[(name, index)] for index in indices]
        else:
            codes = repeat(errors)
        if flexible:
            out += map(_PARTITION_V8.pack, indices, codes, repeat(0))
            out.append(_NO_TAGS)
        else:
            out += map(_PARTITION.pack, indices, codes)
    if flexible:
        out.append(_NO_TAGS)
    return b"".join(out)
