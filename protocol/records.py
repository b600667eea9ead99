"""Record batches, magic v2 (Kafka's DefaultRecordBatch): decode, encode, CRC-32C, compression.

A batch is a 61-byte header followed by its records (compressed as one block when the attributes
say so). The CRC (CRC-32C) covers the bytes from the attributes to the end of the batch, so the
base offset and the partition leader epoch, which sit before it, can be patched in place by a
broker without touching — or re-checking — the records.

Pure functions over bytes; no I/O. Decoders raise only DecodeError.
"""
from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import cramjam
import google_crc32c

from kcoord.protocol.errors import DecodeError

# ---------------------------------------------------------------------------------------------
# Header layout. One field per line; offsets below are derived from the format, not hard-coded.
_HEADER_FIELDS = (
    ("q", "base_offset"),             # int64: offset of the first record
    ("i", "batch_length"),            # int32: bytes after this field (batch size - 12)
    ("i", "partition_leader_epoch"),  # int32: set by the leader, outside the CRC
    ("b", "magic"),                   # int8: 2
    ("I", "crc"),                     # uint32: CRC-32C of attributes..end
    ("h", "attributes"),              # int16: compression, timestamp type, txn, control, horizon
    ("i", "last_offset_delta"),       # int32: last offset - base offset
    ("q", "base_timestamp"),          # int64: first timestamp (or the delete horizon)
    ("q", "max_timestamp"),           # int64: largest timestamp (LogAppendTime when bit 3 set)
    ("q", "producer_id"),             # int64: -1 when not idempotent
    ("h", "producer_epoch"),          # int16: -1 when not idempotent
    ("i", "base_sequence"),           # int32: -1 when not idempotent
    ("i", "records_count"),           # int32: number of records
)
HEADER = struct.Struct(">" + "".join(code for code, _ in _HEADER_FIELDS))
HEADER_SIZE = HEADER.size  # 61


def _field_offset(name: str) -> int:
    codes = ""
    for code, field in _HEADER_FIELDS:
        if field == name:
            return struct.calcsize(">" + codes)
        codes += code
    raise KeyError(name)


BASE_OFFSET_OFFSET = _field_offset("base_offset")
LENGTH_OFFSET = _field_offset("batch_length")
PARTITION_LEADER_EPOCH_OFFSET = _field_offset("partition_leader_epoch")
MAGIC_OFFSET = _field_offset("magic")
CRC_OFFSET = _field_offset("crc")
ATTRIBUTES_OFFSET = _field_offset("attributes")
MAX_TIMESTAMP_OFFSET = _field_offset("max_timestamp")
RECORDS_OFFSET = HEADER_SIZE
# The batch length counts everything after the length field itself.
LOG_OVERHEAD = LENGTH_OFFSET + 4
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_OFFSET_AND_LENGTH = struct.Struct(">qi")

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
COMPRESSION_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CREATE_TIME, LOG_APPEND_TIME = 0, 1


def crc32c(data) -> int:
    """CRC-32C (Castagnoli). google-crc32c's C extension only takes bytes, so views are copied."""
    if type(data) is not bytes:
        data = bytes(data)
    return google_crc32c.value(data)


def crc32c_extend(crc: int, data: bytes) -> int:
    """The CRC-32C of what `crc` covered followed by `data` (bytes)."""
    return google_crc32c.extend(crc, data)


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None  # None is a tombstone
    headers: tuple  # ((str, bytes | None), ...)


# ---------------------------------------------------------------------------------------------
# Header parsing and in-place patches


def parse_batch_header(buf, offset: int = 0) -> BatchHeader:
    """Parse the 61-byte header at `offset`; checks magic and length, not the CRC."""
    if len(buf) - offset < HEADER_SIZE:
        raise DecodeError("record batch header truncated", offset=offset)
    header = BatchHeader._make(HEADER.unpack_from(buf, offset))
    if header.magic != 2:
        raise DecodeError(f"unsupported record batch magic {header.magic}", offset=offset)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise DecodeError(f"record batch length {header.batch_length} too small", offset=offset)
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise DecodeError("negative record count or offset delta", offset=offset)
    return header


def batch_crc(batch) -> int:
    """The CRC a batch should carry: CRC-32C of its bytes from the attributes to the end."""
    return crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def verify_crc(batch) -> bool:
    """True when the stored CRC matches the batch's bytes."""
    if len(batch) < HEADER_SIZE:
        return False
    return _UINT32.unpack_from(batch, CRC_OFFSET)[0] == batch_crc(batch)


def set_base_offset(batch: bytearray | memoryview, base_offset: int, offset: int = 0) -> None:
    """Patch the base offset in place; the CRC does not cover it, so records stay untouched."""
    _INT64.pack_into(batch, offset + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(batch: bytearray | memoryview, epoch: int, offset: int = 0) -> None:
    """Patch the partition leader epoch in place; outside the CRC too."""
    _INT32.pack_into(batch, offset + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(batch: bytearray | memoryview, timestamp_ms: int, offset: int = 0) -> None:
    """Stamp LogAppendTime: max timestamp := timestamp_ms, timestamp-type bit set, CRC recomputed.

    Record timestamps are left as they are; readers of a LogAppendTime batch use the max timestamp
    for every record (as Kafka's do).
    """
    view = memoryview(batch)[offset:]
    attributes = _INT16.unpack_from(view, ATTRIBUTES_OFFSET)[0]
    _INT16.pack_into(view, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(view, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    size = _INT32.unpack_from(view, LENGTH_OFFSET)[0] + LOG_OVERHEAD
    _UINT32.pack_into(view, CRC_OFFSET, batch_crc(view[:size]))


def iter_batches(buf, verify: bool = False) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Yield (position, header, view of the whole batch) for each batch in `buf`.

    Stops quietly at a short or torn tail (fewer bytes than the header or the length promise), as
    a fetch response or a segment being appended may end mid-batch. A bad magic or length raises
    DecodeError; with verify=True so does a CRC mismatch.
    """
    view = memoryview(buf)
    end = len(view)
    position = 0
    while end - position >= LOG_OVERHEAD:
        _, length = _OFFSET_AND_LENGTH.unpack_from(view, position)
        if end - position < HEADER_SIZE or end - position < length + LOG_OVERHEAD:
            return
        header = parse_batch_header(view, position)
        batch = view[position:position + header.size]
        if verify and batch_crc(batch) != header.crc:
            raise DecodeError("record batch CRC mismatch", offset=position)
        yield position, header, batch
        position += header.size


# ---------------------------------------------------------------------------------------------
# Compression


def _xerial_snappy_decode(data: bytes) -> bytes:
    # Java clients (snappy-java SnappyOutputStream) frame raw snappy blocks: an 8-byte magic, two
    # int32 versions, then blocks of int32 length + raw snappy bytes.
    out = []
    position = 16
    while position < len(data):
        if len(data) - position < 4:
            raise DecodeError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise DecodeError("truncated xerial snappy block")
        out.append(bytes(cramjam.snappy.decompress_raw(data[position:position + length])))
        position += length
    return b"".join(out)


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def _snappy_decode(data: bytes) -> bytes:
    if data[:8] == _XERIAL_MAGIC and len(data) >= 16:
        return _xerial_snappy_decode(data)
    return bytes(cramjam.snappy.decompress_raw(data))


def _snappy_encode(data: bytes) -> bytes:
    # Xerial framing, which every client (Java included) can read.
    parts = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start:start + _XERIAL_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _gzip_encode(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: gzip container
    return compressor.compress(data) + compressor.flush()


def _gzip_decode(data: bytes) -> bytes:
    decompressor = zlib.decompressobj(31)
    out = decompressor.decompress(data)
    if not decompressor.eof:
        raise DecodeError("truncated gzip stream")
    return out


def _lz4_encode(data: bytes) -> bytes:
    # LZ4 frame with independent blocks: Java's reader (KafkaLZ4BlockInputStream) rejects linked
    # blocks, which are cramjam's default.
    compressor = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    compressor.compress(data)
    return bytes(compressor.finish())


_DECOMPRESS = {
    GZIP: _gzip_decode,
    SNAPPY: _snappy_decode,
    LZ4: lambda data: bytes(cramjam.lz4.decompress(data)),
    ZSTD: lambda data: bytes(cramjam.zstd.decompress(data)),
}
_COMPRESS = {
    GZIP: _gzip_encode,
    SNAPPY: _snappy_encode,
    LZ4: _lz4_encode,
    ZSTD: lambda data: bytes(cramjam.zstd.compress(data)),
}


def decompress(codec: int, data: bytes) -> bytes:
    try:
        fn = _DECOMPRESS[codec]
    except KeyError:
        raise DecodeError(f"unknown compression codec {codec}") from None
    try:
        return fn(data)
    except DecodeError:
        raise
    except Exception as exc:  # codec libraries raise their own types on garbage
        raise DecodeError(f"{COMPRESSION_NAMES[codec]} decompression failed: {exc}") from exc


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    return _COMPRESS[codec](data)


# ---------------------------------------------------------------------------------------------
# Records


def _records_payload(batch, header: BatchHeader):
    payload = memoryview(batch)[RECORDS_OFFSET:header.size]
    if header.compression == NONE:
        return payload
    return decompress(header.compression, bytes(payload))


def _varint(buf, pos: int) -> tuple[int, int]:
    """Zig-zag varint (up to 64 bits) at pos -> (value, next pos). IndexError when truncated."""
    byte = buf[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes")


def _bytes_field(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = _varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise DecodeError("record field runs past the record")
    return bytes(buf[pos:pos + length]), pos + length


def iter_record_tuples(batch, header: BatchHeader | None = None) -> Iterator[tuple]:
    """Fast path: yield (offset, timestamp, key, value, headers) tuples, no Record objects.

    headers is a tuple of (str, bytes | None) pairs, () when there are none. Under LogAppendTime
    every record's timestamp is the batch's max timestamp.
    """
    if header is None:
        header = parse_batch_header(batch)
    if len(batch) < header.size:
        raise DecodeError("record batch truncated")
    # bytes, not a view: indexing and slicing bytes is faster and slices need no second copy.
    data = bytes(_records_payload(batch, header))
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    end = len(data)
    pos = 0
    varint = _varint
    try:
        for _ in range(header.records_count):
            # Single-byte varints are the common case: decode them inline. The repetition below is
            # deliberate: a helper call per field costs more than the decoding itself.
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                length, pos = varint(data, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise DecodeError("record runs past the batch")
            b = data[pos + 1]  # pos: record attributes, unused
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                timestamp_delta, pos = varint(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = varint(data, pos)
            b = data[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                size, pos = varint(data, pos)
            if size < 0:
                key = None
            else:
                key = data[pos:pos + size]
                pos += size
            b = data[pos]
            if b < 0x80:
                size = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                size, pos = varint(data, pos)
            if size < 0:
                value = None
            else:
                value = data[pos:pos + size]
                pos += size
            if pos >= record_end:
                raise DecodeError("record fields run past the record")
            count, pos = varint(data, pos)
            if count == 0:
                headers = ()
            else:
                if count < 0 or count > length:
                    raise DecodeError("bad record header count")
                items = []
                for _ in range(count):
                    name, pos = _bytes_field(data, pos, record_end)
                    if name is None:
                        raise DecodeError("null record header key")
                    header_value, pos = _bytes_field(data, pos, record_end)
                    items.append((name.decode("utf-8"), header_value))
                headers = tuple(items)
            if pos != record_end:
                raise DecodeError("record length does not match its fields")
            timestamp = append_time if append_time is not None else base_timestamp + timestamp_delta
            yield base_offset + offset_delta, timestamp, key, value, headers
    except IndexError:
        raise DecodeError("record truncated") from None
    except UnicodeDecodeError as exc:
        raise DecodeError(f"record header key is not UTF-8: {exc}") from None
    if pos != end:
        raise DecodeError(f"{end - pos} trailing bytes after the last record")


def iter_key_values(buf) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """Fastest path over many batches: (offset, key, value) for every record, control batches skipped."""
    for _, header, batch in iter_batches(buf):
        if header.is_control:
            continue
        for offset, _ts, key, value, _headers in iter_record_tuples(batch, header):
            yield offset, key, value


def decode_records(batch) -> list[Record]:
    """All records of one batch as Record objects (decompressing as needed)."""
    return [Record._make(t) for t in iter_record_tuples(batch)]


def _encode_varint(value: int, out: bytearray) -> None:
    value = (value << 1) ^ (value >> 63)
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _encode_bytes(value: bytes | None, out: bytearray) -> None:
    if value is None:
        out.append(1)  # zig-zag(-1)
        return
    _encode_varint(len(value), out)
    out += value


def _encode_record(out: bytearray, offset_delta: int, timestamp_delta: int,
                   key: bytes | None, value: bytes | None, headers) -> None:
    body = bytearray(b"\x00")  # record attributes
    _encode_varint(timestamp_delta, body)
    _encode_varint(offset_delta, body)
    _encode_bytes(key, body)
    _encode_bytes(value, body)
    _encode_varint(len(headers), body)
    for name, header_value in headers:
        _encode_bytes(name.encode("utf-8") if isinstance(name, str) else name, body)
        _encode_bytes(header_value, body)
    _encode_varint(len(body), out)
    out += body


def _normalise(records, base_offset: int, now_ms: int) -> list[tuple]:
    """Items are Record (offset and timestamp kept) or (key, value[, headers[, timestamp]])."""
    out = []
    for index, item in enumerate(records):
        if isinstance(item, Record):
            out.append((item.offset - base_offset, item.timestamp, item.key, item.value, item.headers or ()))
            continue
        key, value, *rest = item
        headers = rest[0] if rest and rest[0] else ()
        timestamp = rest[1] if len(rest) > 1 and rest[1] is not None else now_ms
        out.append((index, timestamp, key, value, headers))
    return out


def build_batch(records: Iterable, base_offset: int = 0, compression: int = NONE,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                transactional: bool = False, control: bool = False, timestamp_type: int = CREATE_TIME,
                *, partition_leader_epoch: int = -1, timestamp_ms: int | None = None,
                last_offset_delta: int | None = None, delete_horizon_ms: int | None = None) -> bytes:
    """Encode one v2 batch.

    `records` items are Record objects (their offsets and timestamps are kept, so a compacted batch
    can be rebuilt with gaps) or tuples (key, value[, headers[, timestamp_ms]]) numbered from
    base_offset. Missing timestamps default to `timestamp_ms` (or now). `last_offset_delta` may
    exceed the last record's (compaction keeps the original batch's span). With a delete horizon,
    the base timestamp is the horizon and bit 6 is set (KIP-534).
    """
    now_ms = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    items = _normalise(records, base_offset, now_ms)
    if items:
        first_timestamp = items[0][1]
        max_timestamp = max(item[1] for item in items)
        span = max(item[0] for item in items)
    else:
        first_timestamp = max_timestamp = -1
        span = 0
    base_timestamp = delete_horizon_ms if delete_horizon_ms is not None else first_timestamp
    if last_offset_delta is None:
        last_offset_delta = span
    payload = bytearray()
    for offset_delta, timestamp, key, value, headers in items:
        _encode_record(payload, offset_delta, timestamp - base_timestamp, key, value, headers)
    body = compress(compression, bytes(payload))
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), partition_leader_epoch,
                     2, 0, attributes, last_offset_delta, base_timestamp, max_timestamp,
                     producer_id, producer_epoch, base_sequence, len(items))
    out += body
    _UINT32.pack_into(out, CRC_OFFSET, batch_crc(out))
    return bytes(out)
