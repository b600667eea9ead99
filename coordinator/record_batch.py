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

from protocol.primitives import varint_bytes
from protocol.records import CRC_OFFSET, HEADER, HEADER_SIZE, LOG_OVERHEAD, NONE, batch_crc, build_batch

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
