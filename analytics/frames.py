"""Record framing inside batches, decoded for many batches at once.

The records of the chosen batches sit in one "arena" (compressed blocks are inflated and appended).
A record's start depends on the previous record's length, so record starts are found by walking all
batches in lockstep, one vectorised step per record index. Every field after that is read with
vectorised numpy passes over all records together.
"""
from dataclasses import dataclass

import numpy as np

from kcoord.analytics import codecs, vector
from kcoord.analytics.batches import COMPRESSION_MASK, HEADER


@dataclass
class Arena:
    data: bytes              # the batches' bytes, inflated compressed blocks, then vector.PAD zeros
    array: np.ndarray        # the same bytes as uint8
    region_start: np.ndarray  # per chosen batch: where its records begin in `data`
    region_end: np.ndarray


def build_arena(buf, scan, rows) -> Arena:
    """`rows` are batch indices in log order. Uncompressed records are used where they lie (one copy
    of the span of bytes the batches cover); compressed blocks are inflated and appended after it."""
    rows = np.asarray(rows, dtype=np.int64)
    mv = memoryview(buf)
    if not len(rows):
        data = bytes(vector.PAD)
        return Arena(data, np.frombuffer(data, dtype=np.uint8), rows, rows)
    span_start, span_end = int(scan["position"][rows[0]]), int(scan["end"][rows[-1]])
    starts = scan["position"][rows] - span_start + HEADER.size
    ends = scan["end"][rows] - span_start
    parts, at = [mv[span_start:span_end]], span_end - span_start
    codecs_of = scan["attributes"][rows] & COMPRESSION_MASK
    for k in np.flatnonzero(codecs_of).tolist():
        block = codecs.decompress(int(codecs_of[k]), mv[int(scan["position"][rows[k]]) + HEADER.size:
                                                        int(scan["end"][rows[k]])])
        parts.append(block)
        starts[k], ends[k] = at, at + len(block)
        at += len(block)
    parts.append(bytes(vector.PAD))
    data = b"".join(parts)
    return Arena(data, np.frombuffer(data, dtype=np.uint8), starts, ends)


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


VECTOR_MIN_BATCHES = 32      # below this many unfinished batches, a plain loop is cheaper


def record_starts(arena: Arena, counts) -> tuple[np.ndarray, np.ndarray]:
    """Start of every record, and the arena region (batch) it belongs to, in log order.

    Many batches are walked in lockstep: step k finds the k-th record of every batch that has one,
    with one vectorised varint read. The few long batches left are finished by a plain loop. A batch
    whose records run past its region is cut at the last record that fits.
    """
    a = arena.array
    pos = arena.region_start.copy()
    left = np.asarray(counts, dtype=np.int64).copy()
    starts, owners = [], []
    active = np.flatnonzero((left > 0) & (pos < arena.region_end))
    while len(active) >= VECTOR_MIN_BATCHES:
        p = pos[active]
        length, size = vector.varint(a, p)
        nxt = p + size + length
        fits = (nxt <= arena.region_end[active]) & (length >= 0)
        starts.append(p[fits])
        owners.append(active[fits])
        pos[active] = nxt
        left[active] = np.where(fits, left[active] - 1, 0)
        active = active[(left[active] > 0) & (pos[active] < arena.region_end[active])]
    tail_starts, tail_owners = _walk(arena.data, active.tolist(), pos, arena.region_end, left)
    starts.append(tail_starts)
    owners.append(tail_owners)
    s, o = np.concatenate(starts), np.concatenate(owners)
    order = np.lexsort((s, o))               # log order: by batch, then position within it
    return s[order], o[order]


def _walk(data, regions, pos, region_end, left):
    starts, owners = [], []
    add, own = starts.append, owners.append
    for r in regions:
        p, end = int(pos[r]), int(region_end[r])
        for _ in range(int(left[r])):
            if p >= end:
                break
            b = data[p]
            if b < 0x80:                       # one-byte length: records under 64 bytes
                nxt = p + 1 + (b >> 1)
            else:
                length, size = _varint_at(data, p)
                nxt = p + size + length
            if nxt > end or nxt <= p:
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
