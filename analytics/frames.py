"""Record framing inside batches, decoded for many batches at once.

The records of the chosen batches are laid end to end in one "arena" (compressed blocks are
inflated on the way). Only finding where each record starts is a Python loop - a record's start
depends on the previous record's length - and it touches one byte per record in the common case.
Every field after that is read with vectorised numpy passes over all records together.
"""
from dataclasses import dataclass

import numpy as np

from analytics import codecs, vector
from analytics.batches import COMPRESSION_MASK, HEADER


@dataclass
class Arena:
    data: bytes              # records of all chosen batches, then vector.PAD zero bytes
    array: np.ndarray        # the same bytes as uint8
    region_start: np.ndarray  # per chosen batch: where its records begin in `data`
    region_end: np.ndarray


def build_arena(buf, scan, rows) -> Arena:
    mv = memoryview(buf)
    parts, starts, ends, at = [], [], [], 0
    for i in rows:
        block = mv[int(scan["position"][i]) + HEADER.size:int(scan["end"][i])]
        codec = int(scan["attributes"][i]) & COMPRESSION_MASK
        if codec:
            block = codecs.decompress(codec, block)
        parts.append(block)
        starts.append(at)
        at += len(block)
        ends.append(at)
    parts.append(bytes(vector.PAD))
    data = b"".join(parts)
    return Arena(data, np.frombuffer(data, dtype=np.uint8), np.array(starts, dtype=np.int64),
                 np.array(ends, dtype=np.int64))


def _varint_at(data: bytes, p: int):
    """(zig-zag decoded value, size) of one varint; the slow case of the start loop."""
    shift = value = 0
    size = 0
    while True:
        b = data[p + size]
        value |= (b & 0x7F) << shift
        size += 1
        if b < 0x80 or size == 10:
            return (value >> 1) ^ -(value & 1), size
        shift += 7


def record_starts(arena: Arena, counts) -> tuple[np.ndarray, np.ndarray]:
    """Start of every record, and the arena region (batch) it belongs to.

    A batch whose records run past its region is cut at the last record that fits.
    """
    data = arena.data
    starts, owners = [], []
    add, own = starts.append, owners.append
    for r, (p, end, n) in enumerate(zip(arena.region_start.tolist(), arena.region_end.tolist(),
                                        counts, strict=True)):
        for _ in range(n):
            if p >= end:
                break
            b = data[p]
            if b < 0x80:                       # one-byte length: records under 64 bytes
                nxt = p + 1 + (b >> 1)
            else:
                length, size = _varint_at(data, p)
                nxt = p + size + length
            if nxt > end:
                break
            add(p)
            own(r)
            p = nxt
    return np.array(starts, dtype=np.int64), np.array(owners, dtype=np.int64)


@dataclass
class Frames:
    """Per-record framing fields; positions index the arena."""
    start: np.ndarray
    end: np.ndarray
    ts_delta: np.ndarray
    offset_delta: np.ndarray
    key_pos: np.ndarray
    key_len: np.ndarray          # -1: null key
    value_pos: np.ndarray
    value_len: np.ndarray        # -1: null value (a tombstone)
    headers_pos: np.ndarray
    ok: np.ndarray               # the fields fit inside the record


def parse_frames(a: np.ndarray, starts: np.ndarray) -> Frames:
    length, size = vector.varint(a, starts)
    end = starts + size + length
    q = starts + size + 1                                  # skip the attributes byte
    ts_delta, size = vector.varint(a, q)
    q = q + size
    offset_delta, size = vector.varint(a, q)
    q = q + size
    key_len, size = vector.varint(a, q)
    key_pos = q + size
    q = np.minimum(key_pos + np.maximum(key_len, 0), len(a) - vector.PAD)
    value_len, size = vector.varint(a, q)
    value_pos = q + size
    headers_pos = value_pos + np.maximum(value_len, 0)
    ok = (headers_pos <= end) & (key_len >= -1) & (value_len >= -1)
    return Frames(starts, end, ts_delta, offset_delta, key_pos, key_len, value_pos, value_len,
                  headers_pos, ok)
