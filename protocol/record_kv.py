"""(key, value) pairs of record batches, for loaders that need nothing else (compacted-topic replay).

`kcoord.protocol.records.iter_record_tuples` decodes every field of every record; a replay of
`__consumer_offsets` needs only keys and values, in log order. The fast path here reads a record
with a handful of byte lookups: lengths of one or two varint bytes are decoded inline, the two
deltas are skipped without decoding, and a record without headers ends in one 0 byte. Anything
else (longer varints, null keys, headers, a length that does not add up) makes the whole batch
take the reference decoder, which also owns every error. A test proves both agree.

Faster still, for the batches a coordinator writes (one key length, one value length, no headers):
every record has the same framing, so the batch is cut at a fixed stride and the framing is
checked with a strided slice per byte position instead of record by record.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

from kcoord.protocol.records import (
    NONE,
    RECORDS_OFFSET,
    BatchHeader,
    decompress,
    iter_batches,
    iter_record_tuples,
)


class _Unusual(Exception):
    """The batch leaves the fast path's layout; the reference decoder takes it."""


def _fast_key_values(buf: bytes, count: int) -> list[tuple[bytes, bytes | None]]:
    out = []
    append = out.append
    pos = 0
    for _ in range(count):
        # Record length: a zig-zag varint of one or two bytes (a record under 8 KiB); a third
        # byte would leave the value at 1 << 14 or more.
        b = buf[pos]
        if b >= 0x80:
            pos += 1
            b = (b & 0x7F) | buf[pos] << 7
        pos += 1
        if b & 1 or b >= 0x4000:
            raise _Unusual
        end = pos + (b >> 1)
        p = pos + 1  # attributes byte
        while buf[p] >= 0x80:  # timestamp delta: skipped
            p += 1
        p += 1
        while buf[p] >= 0x80:  # offset delta: skipped (records are in offset order)
            p += 1
        p += 1
        b = buf[p]  # key length: one byte, not null
        if b >= 0x80 or b & 1:
            raise _Unusual
        p += 1
        key_end = p + (b >> 1)
        key = buf[p:key_end]
        # Value length: null (1, a tombstone), or one or two bytes as above.
        b = buf[key_end]
        p = key_end + 1
        if b >= 0x80:
            b = (b & 0x7F) | buf[p] << 7
            p += 1
        if b == 1:
            value = None
            value_end = p
        elif b & 1 or b >= 0x4000:
            raise _Unusual
        else:
            value_end = p + (b >> 1)
            value = buf[p:value_end]
        if value_end + 1 != end or buf[value_end] != 0:  # exactly one byte left: zero headers
            raise _Unusual
        append((key, value))
        pos = end
    if pos != len(buf):
        raise _Unusual
    return out


def _uniform_columns(buf: bytes, count: int) -> tuple[tuple[bytes, ...], tuple[bytes, ...]] | None:
    """The records of a batch whose records all have one layout (a coordinator's write of one topic:
    one key length, one value length, timestamp delta 0, offset deltas 0..count-1, no headers) are
    cut at a fixed stride, their framing bytes checked with one strided slice each: (keys, values), or
    None otherwise."""
    # record: length (1-2 bytes) | attributes | timestamp delta | offset delta | key length | key
    #         | value length | value | header count; every other varint one byte.
    if not 0 < count <= 64 or len(buf) % count:
        return None
    stride = len(buf) // count
    length, at = buf[0], 1
    if length >= 0x80:
        length, at = (length & 0x7F) | buf[1] << 7, 2
    key_size = buf[at + 3]
    if length & 1 or at + (length >> 1) != stride or key_size & 1 or key_size >= 0x80 or buf[at + 1] >= 0x80:
        return None
    key_at = at + 4
    value_at = key_at + (key_size >> 1) + 1
    value_size = buf[value_at - 1]
    if value_size & 1 or value_size >= 0x80 or value_at + (value_size >> 1) + 1 != stride:
        return None
    for i in (*range(at + 2), at + 3, value_at - 1):  # length, attributes, timestamp delta, both lengths
        if buf[i::stride] != buf[i:i + 1] * count:
            return None
    if buf[at + 2::stride] != _OFFSET_DELTAS[:count] or buf[stride - 1::stride] != bytes(count):
        return None
    layout = (stride, key_at, value_at, value_size >> 1, count)
    cut = _CUTS.get(layout) or _cut(layout)
    fields = cut(buf)  # key, value, key, value, ...: every slice in one C call
    return fields[0::2], fields[1::2]


_OFFSET_DELTAS = bytes(range(0, 128, 2))  # zig-zag varints of 0..63
# (stride, key at, value at, value length, count) -> unpack of a struct holding each record's key and
# value; a coordinator writes few layouts (one per group and topic shape), so they are few (bounded).
_CUTS: dict[tuple[int, int, int, int, int], Callable[[bytes], tuple[bytes, ...]]] = {}
_CUTS_MAX = 256


def _cut(layout: tuple[int, int, int, int, int]) -> Callable[[bytes], tuple[bytes, ...]]:
    stride, key_at, value_at, value_len, count = layout
    key_len = value_at - 1 - key_at
    record = f"{key_at}x{key_len}s1x{value_len}s{stride - value_at - value_len}x"
    cut = struct.Struct(">" + record * count).unpack
    if len(_CUTS) >= _CUTS_MAX:
        _CUTS.clear()
    _CUTS[layout] = cut
    return cut


def _key_values(batch, header: BatchHeader, from_offset: int):
    """(keys, values) columns of a uniform batch, else the list of (key, value) pairs."""
    if header.base_offset < from_offset:  # straddles the start: offsets are needed
        return [(key, value) for offset, _ts, key, value, _h in iter_record_tuples(batch, header)
                if offset >= from_offset]
    if len(batch) >= header.size:
        raw = batch[RECORDS_OFFSET:header.size]
        payload = bytes(raw) if header.compression == NONE else decompress(header.compression, bytes(raw))
        columns = _uniform_columns(payload, header.records_count)
        if columns is not None:
            return columns
        try:
            return _fast_key_values(payload, header.records_count)
        except (_Unusual, IndexError):
            pass
    return [(key, value) for _o, _ts, key, value, _h in iter_record_tuples(batch, header)]


def batch_key_values(batch, header: BatchHeader, from_offset: int = -1) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of one batch whose offset is >= from_offset, in order."""
    got = _key_values(batch, header, from_offset)
    return list(zip(*got, strict=True)) if type(got) is tuple else got


def fold_key_values(latest: dict, batch, header: BatchHeader, from_offset: int = -1) -> None:
    """`latest[key] = value` for every record of one batch whose offset is >= from_offset, in order: what a
    replay that keeps only the last value per key needs, without a (key, value) pair per record."""
    got = _key_values(batch, header, from_offset)
    latest.update(zip(*got, strict=True) if type(got) is tuple else got)


def iter_log_key_values(buf, from_offset: int = -1) -> Iterator[tuple[bytes | None, bytes | None]]:
    """(key, value) of every data record in `buf` (whole batches) at or after from_offset."""
    for _, header, batch in iter_batches(buf):
        if header.is_control or header.last_offset < from_offset:
            continue
        yield from batch_key_values(batch, header, from_offset)
