"""One v2 record batch per coordinator write, built in one pass.

The coordinator's records are small, carry no headers, and one write stamps them all with the same
time, so every record has timestamp delta 0 and its varints (offset delta, key and value lengths,
record length) are small non-negative numbers: they come from a precomputed table and each record
is a handful of byte strings joined once. The bytes are exactly `protocol.records.build_batch`'s
(tests/coordinator/test_record_batch.py proves it); anything outside that shape (headers,
compression, long fields) is handed to `build_batch`.
"""
from __future__ import annotations

import struct
import time

from protocol.consumer_offsets import encode_offset_commit_key
from protocol.primitives import varint_bytes
from protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NONE,
    batch_crc,
    build_batch,
    crc32c,
    crc32c_extend,
)

_TABLE_SIZE = 1 << 14  # varints of 1 and 2 bytes: every field of an offset commit record
_VARINT = tuple(varint_bytes(n) for n in range(_TABLE_SIZE))
# attributes 0 and timestamp delta 0, then the offset delta: the head of every record.
_HEAD = tuple(b"\x00\x00" + v for v in _VARINT)
_NULL = varint_bytes(-1)
_NO_HEADERS = b"\x00"
_CRC = struct.Struct(">I")


class _Fallback(Exception):
    """The records do not fit the fast shape."""


def _payload(records: list) -> bytes:
    varint, head = _VARINT, _HEAD
    parts: list[bytes] = []
    extend = parts.extend
    try:
        for i, (key, value, headers) in enumerate(records):
            if headers or key is None:
                raise _Fallback
            klen = varint[len(key)]
            if value is None:
                size = 2 + len(head[i]) + len(klen) + len(key)
                extend((varint[size], head[i], klen, key, _NULL, _NO_HEADERS))
            else:
                vlen = varint[len(value)]
                size = 1 + len(head[i]) + len(klen) + len(key) + len(vlen) + len(value)
                extend((varint[size], head[i], klen, key, vlen, value, _NO_HEADERS))
    except (IndexError, ValueError):  # a field or a batch too long for the table; a record not (k, v, h)
        raise _Fallback from None
    return b"".join(parts)


def build_coordinator_batch(records: list, compression: int = NONE, timestamp_ms: int | None = None) -> bytes:
    """`build_batch(records, compression=compression, timestamp_ms=timestamp_ms)`, faster for
    (key, value, headers) records without headers and without compression."""
    if compression != NONE or not records:
        return build_batch(records, compression=compression, timestamp_ms=timestamp_ms)
    now_ms = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    try:
        payload = _payload(records)
    except _Fallback:
        return build_batch(records, compression=compression, timestamp_ms=now_ms)
    n = len(records)
    out = bytearray(HEADER_SIZE)
    # base offset 0 (the log assigns it), length, leader epoch -1, magic 2, crc (below), attributes 0,
    # last offset delta, base and max timestamp, no producer id / epoch / sequence, record count.
    HEADER.pack_into(out, 0, 0, HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, 2, 0, 0, n - 1,
                     now_ms, now_ms, -1, -1, -1, n)
    out += payload
    _CRC.pack_into(out, CRC_OFFSET, batch_crc(out))
    return bytes(out)


# -- a commit's OffsetCommit records, straight from its values ----------------------------------------
# The usual record of a commit: key v1, value v3 without metadata (no expire timestamp), no headers. Its
# bytes up to the value depend only on (group, topic, partition) and its offset delta in the batch, and a
# group commits the same partitions in the same order again and again: that prefix is cached, and each
# record is the prefix plus one struct call for the value and the header count.
_VALUE_AND_NO_HEADERS = struct.Struct(
    ">h"  # OffsetCommitValue version: 3
    "q"   # offset
    "i"   # leader epoch
    "h"   # metadata: empty string
    "q"   # commit timestamp
    "b"   # the record's header count: 0
)
_VALUE_SIZE = _VALUE_AND_NO_HEADERS.size - 1
_VALUE_LENGTH = varint_bytes(_VALUE_SIZE)
# group -> (topic, partition) -> (offset delta, record bytes before the value); bounded in total
_PREFIXES: dict[str, dict[tuple[str, int], tuple[int, bytes]]] = {}
_PREFIXES_MAX = 1 << 16
_prefix_count = 0


def _record_prefix(group_id: str, tp: tuple[str, int], delta: int) -> tuple[int, bytes]:
    global _prefix_count
    key = encode_offset_commit_key(group_id, tp[0], tp[1])
    body = b"\x00\x00" + varint_bytes(delta) + varint_bytes(len(key)) + key + _VALUE_LENGTH
    entry = (delta, varint_bytes(len(body) + _VALUE_AND_NO_HEADERS.size) + body)
    if _prefix_count >= _PREFIXES_MAX:
        _PREFIXES.clear()
        _prefix_count = 0
    group = _PREFIXES.get(group_id)
    if group is None:
        group = _PREFIXES[group_id] = {}
    if tp not in group:
        _prefix_count += 1
    group[tp] = entry
    return entry


def build_offset_commit_batch(group_id: str, values: dict, timestamp_ms: int | None = None) -> bytes | None:
    """The v2 batch of one OffsetCommit record per (topic, partition) -> OffsetCommitValue of `values`, the
    bytes `build_batch` would write for them (tests/coordinator/test_record_batch.py), or None when a value
    needs another layout (metadata, an expire timestamp) or a field is out of range: then the caller builds
    the records and the batch the general way."""
    n = len(values)
    if not n:
        return None
    prefixes = _PREFIXES.get(group_id) or {}
    pack = _VALUE_AND_NO_HEADERS.pack
    parts: list[bytes] = []
    extend = parts.extend
    delta = 0
    try:
        for tp, v in values.items():  # v: offset, metadata, commit timestamp, leader epoch, expire timestamp
            if v[1] or v[4] >= 0:
                return None
            entry = prefixes.get(tp)
            if entry is None or entry[0] != delta:
                entry = _record_prefix(group_id, tp, delta)
            extend((entry[1], pack(3, v[0], v[3], 0, v[2], 0)))
            delta += 1
    except (struct.error, ValueError):  # a value out of its field's range, a string too long for a key
        return None
    payload = b"".join(parts)
    now_ms = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    header = bytearray(HEADER_SIZE)
    HEADER.pack_into(header, 0, 0, HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, 2, 0, 0, n - 1,
                     now_ms, now_ms, -1, -1, -1, n)
    # The CRC covers the header from the attributes on, then the records: no copy of the payload for it.
    _CRC.pack_into(header, CRC_OFFSET, crc32c_extend(crc32c(bytes(header[ATTRIBUTES_OFFSET:])), payload))
    return bytes(header) + payload
