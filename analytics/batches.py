"""Scanning a segment's record batches (magic 2) by their 61-byte headers, without touching records.

A segment is a plain concatenation of batches. The scan stops cleanly at the first place that is not a
whole, valid batch: a zero-filled (preallocated) tail, a torn last write, a CRC mismatch or a magic
other than 2. Everything after that point is what Kafka's recovery would truncate.
"""
import struct
from dataclasses import dataclass

import google_crc32c
import numpy as np

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
LOG_OVERHEAD = 12                      # base offset + length: the part `length` does not count
CRC_START = 21                         # attributes onward are covered by the CRC
MIN_LENGTH = HEADER.size - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20

# Column order of ScanResult.headers (one row per batch).
COLUMNS = ("position", "end", "base_offset", "attributes", "last_offset_delta", "base_timestamp",
           "max_timestamp", "producer_id", "producer_epoch", "count")


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


def scan(buf, verify_crc=True) -> ScanResult:
    rows = []
    pos, size, reason = 0, len(buf), "end"
    mv = memoryview(buf)
    unpack = HEADER.unpack_from
    while pos < size:
        if pos + HEADER.size > size:
            reason = "torn" if any(mv[pos:]) else "zero-fill"
            break
        (base, length, _epoch, magic, crc, attrs, lod, base_ts, max_ts, pid, pepoch, _seq,
         count) = unpack(buf, pos)
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
        if verify_crc and google_crc32c.value(bytes(mv[pos + CRC_START:end])) != crc:
            reason = "crc"
            break
        rows.append((pos, end, base, attrs, lod, base_ts, max_ts, pid, pepoch, count))
        pos = end
    table = np.array(rows, dtype=np.int64).reshape(-1, len(COLUMNS))
    return ScanResult({name: table[:, i] for i, name in enumerate(COLUMNS)}, pos, reason)
