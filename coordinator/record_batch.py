"""One v2 record batch per coordinator write, built in one pass.

The coordinator's records are small, carry few headers (an epoch bump's rebalance headers), and one
write stamps them all with the same time, so every record has timestamp delta 0 and its varints
(offset delta, key, value and header lengths, record length) are small non-negative numbers: they
come from a precomputed table and each record is a handful of byte strings joined once. The bytes are
exactly `kcoord.protocol.records.build_batch`'s (tests/coordinator/test_record_batch.py proves it); anything
outside that shape (compression, long fields) is handed to `build_batch`.
"""
from __future__ import annotations

import struct
import time
from itertools import chain
from operator import itemgetter

from kcoord.protocol.consumer_offsets import encode_offset_commit_key
from kcoord.protocol.primitives import varint_bytes
from kcoord.protocol.records import (
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


def _headers(headers) -> bytes:
    """A record's header section: count, then each name and value (a null value: length -1)."""
    varint = _VARINT
    parts = [varint[len(headers)]]
    for name, value in headers:
        name = name.encode("utf-8") if isinstance(name, str) else name
        parts += (varint[len(name)], name, _NULL) if value is None else (varint[len(name)], name,
                                                                          varint[len(value)], value)
    return b"".join(parts)


def _payload(records: list) -> bytes:
    varint, head = _VARINT, _HEAD
    parts: list[bytes] = []
    extend = parts.extend
    try:
        for i, (key, value, headers) in enumerate(records):
            if key is None:
                raise _Fallback
            klen = varint[len(key)]
            if headers:  # e.g. the rebalance headers of an epoch bump
                tail = _headers(headers)
                if value is None:
                    size = 1 + len(head[i]) + len(klen) + len(key) + len(tail)
                    extend((varint[size], head[i], klen, key, _NULL, tail))
                else:
                    vlen = varint[len(value)]
                    size = len(head[i]) + len(klen) + len(key) + len(vlen) + len(value) + len(tail)
                    extend((varint[size], head[i], klen, key, vlen, value, tail))
            elif value is None:
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
    (key, value, headers) records without compression."""
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
# bytes up to the value's offset depend only on (group, topic, partition) and its offset delta in the
# batch, and a group commits the same partitions in the same order again and again. So a commit's layout
# (group, its partitions in order) is cached: each record's constant prefix, and one struct format for
# the whole payload that takes each prefix and the value's three fields. The payload is then one struct
# call over arguments gathered in C, with no Python step per record.
_VALUE_VERSION = b"\x00\x03"  # OffsetCommitValue v3, the end of a record's constant prefix
_VALUE_FIELDS = (
    "q"   # offset
    "i"   # leader epoch
    "2x"  # metadata: the empty string (length 0)
    "q"   # commit timestamp
    "x"   # the record's header count: 0
)
_VALUE_SIZE = len(_VALUE_VERSION) + struct.calcsize(">" + _VALUE_FIELDS) - 1  # without the header count
_LAYOUTS: dict[tuple[str, tuple], tuple[list[bytes], struct.Struct]] = {}
_LAYOUTS_MAX = 1024
_offset, _metadata, _commit_ts, _epoch, _expire = (itemgetter(i) for i in range(5))  # OffsetCommitValue


def _layout(group_id: str, tps: tuple) -> tuple[list[bytes], struct.Struct]:
    """The records' constant prefixes (length, attributes, deltas, key, value length and version) and
    the payload's struct format for a commit of `tps`, in that order."""
    prefixes = []
    for delta, (topic, partition) in enumerate(tps):
        key = encode_offset_commit_key(group_id, topic, partition)
        body = (b"\x00\x00" + varint_bytes(delta) + varint_bytes(len(key)) + key + varint_bytes(_VALUE_SIZE)
                + _VALUE_VERSION)
        prefixes.append(varint_bytes(len(body) + _VALUE_SIZE - len(_VALUE_VERSION) + 1) + body)
    layout = (prefixes, struct.Struct(">" + "".join(f"{len(p)}s{_VALUE_FIELDS}" for p in prefixes)))
    if len(_LAYOUTS) >= _LAYOUTS_MAX:
        _LAYOUTS.clear()
    _LAYOUTS[group_id, tps] = layout
    return layout


def build_offset_commit_batch(group_id: str, values: dict, timestamp_ms: int | None = None) -> bytes | None:
    """The v2 batch of one OffsetCommit record per (topic, partition) -> OffsetCommitValue of `values`, the
    bytes `build_batch` would write for them (tests/coordinator/test_record_batch.py), or None when a value
    needs another layout (metadata, an expire timestamp) or a field is out of range: then the caller builds
    the records and the batch the general way."""
    n = len(values)
    if not n:
        return None
    vs = values.values()
    if any(map(_metadata, vs)) or max(map(_expire, vs)) >= 0:
        return None
    tps = tuple(values)
    try:
        prefixes, payload_struct = _LAYOUTS.get((group_id, tps)) or _layout(group_id, tps)
        payload = payload_struct.pack(*chain.from_iterable(
            zip(prefixes, map(_offset, vs), map(_epoch, vs), map(_commit_ts, vs), strict=True)))
    except (struct.error, ValueError):  # a value out of its field's range, a string too long for a key
        return None
    now_ms = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    header = bytearray(HEADER_SIZE)
    HEADER.pack_into(header, 0, 0, HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, 2, 0, 0, n - 1,
                     now_ms, now_ms, -1, -1, -1, n)
    # The CRC covers the header from the attributes on, then the records: no copy of the payload for it.
    _CRC.pack_into(header, CRC_OFFSET, crc32c_extend(crc32c(bytes(header[ATTRIBUTES_OFFSET:])), payload))
    return bytes(header) + payload
