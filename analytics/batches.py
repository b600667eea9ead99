"""Scanning a segment's record batches (magic 2) by their 61-byte headers, without touching records.

A segment is a plain concatenation of batches. The scan stops cleanly at the first place that is not a
whole, valid batch: a zero-filled (preallocated) tail, a torn last write, a CRC mismatch or a magic
other than 2. Everything after that point is what Kafka's recovery would truncate.
"""
import struct
from dataclasses import dataclass

import google_crc32c
import numpy as np

from kcoord.analytics import vector

HEADER = struct.Struct(
    ">q"   # base offset
    "i"    # length: bytes after this field
    "i"    # partition leader epoch
    "b"    # magic (2)
    "I"    # CRC-32C of attributes..end
    "h"    # attributes
    "i"    # last offset delta
    "q"    # base timestamp
    "q"    # max timestamp
    "q"    # producer id
    "h"    # producer epoch
    "i"    # base sequence
    "i"    # records count
)
LOG_OVERHEAD = struct.calcsize(">qi")  # base offset + length: the part `length` does not count
CRC_START = struct.calcsize(">qiibI")   # attributes onward are covered by the CRC
MIN_LENGTH = HEADER.size - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20



@dataclass
class ScanResult:
    """Header fields of the valid batches of one buffer, each column a numpy int64 array."""
    columns: dict
    valid_bytes: int         # where the scan stopped; == len(buffer) for a clean segment
    stop_reason: str         # "end", "zero-fill", "torn", "crc", "magic"

    def __len__(self):
        return len(self.columns["position"])

    def __getitem__(self, name):
        return self.columns[name]


_LENGTH_MAGIC_CRC = struct.Struct(">ixxxxbI")     # length, (leader epoch skipped), magic, crc at +8
_NAMES = ("base_offset", "length", "leader_epoch", "magic", "crc", "attributes", "last_offset_delta",
          "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "count")


def _layout():
    """{field: (offset, width)} computed from HEADER's format, one entry per field."""
    out, at = {}, 0
    for name, code in zip(_NAMES, HEADER.format.lstrip(">"), strict=True):
        width = struct.calcsize(">" + code)
        out[name] = (at, width)
        at += width
    return out


_FIELDS = {k: v for k, v in _layout().items()
           if k in ("base_offset", "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
                    "producer_id", "producer_epoch", "count")}


def scan(buf, verify_crc=True) -> ScanResult:
    """Walk the batches by their length fields (the one sequential part), then read every header
    field for all batches at once."""
    positions, ends = [], []
    pos, size, reason = 0, len(buf), "end"
    mv = memoryview(buf)
    unpack = _LENGTH_MAGIC_CRC.unpack_from
    crc32c = google_crc32c.value
    while pos < size:
        if pos + HEADER.size > size:
            reason = "torn" if any(mv[pos:]) else "zero-fill"
            break
        length, magic, crc = unpack(buf, pos + 8)
        end = pos + LOG_OVERHEAD + length
        if length < MIN_LENGTH:
            reason = "zero-fill" if length == 0 and not any(mv[pos:pos + HEADER.size]) else "torn"
            break
        if end > size:
            reason = "torn"
            break
        if magic != 2:
            reason = "magic"
            break
        if verify_crc and crc32c(bytes(mv[pos + CRC_START:end])) != crc:
            reason = "crc"
            break
        positions.append(pos)
        ends.append(end)
        pos = end
    at = np.array(positions, dtype=np.int64)
    a = np.frombuffer(buf, dtype=np.uint8) if len(at) else np.zeros(HEADER.size, dtype=np.uint8)
    columns = {"position": at, "end": np.array(ends, dtype=np.int64)}
    for name, (offset, width) in _FIELDS.items():
        columns[name] = vector.be_int(a, at + offset, width)
    return ScanResult(columns, pos, reason)
