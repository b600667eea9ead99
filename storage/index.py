"""Sparse offset index: (relative offset int32, file position int32) entries, 8 bytes each.

As in Kafka, an entry is added when more than index.interval.bytes of batches were appended since
the last one, and it maps the *last* offset of the batch starting at that position. A lookup for
offset X gives the greatest entry with offset <= X: every batch before that position ends before
X, so the scan for X starts there. The index is derived data: recovery rebuilds it from the log
whenever it is missing or disagrees with the log, so it is never fsynced on the append path.
"""
from __future__ import annotations

import bisect
import struct
from array import array

ENTRY = struct.Struct(">ii")  # relative offset, file position


class OffsetIndex:
    """In-memory index of one segment, mirrored to its `.index` file."""

    def __init__(self, base_offset: int, interval_bytes: int) -> None:
        self.base_offset = base_offset
        self.interval_bytes = interval_bytes
        self.relative_offsets = array("i")
        self.positions = array("i")
        self.bytes_since_last_entry = 0

    def __len__(self) -> int:
        return len(self.positions)

    def maybe_add(self, last_offset: int, position: int, batch_size: int) -> bytes | None:
        """Account for a batch appended at `position`; return the entry bytes to write, if any."""
        entry = None
        if self.bytes_since_last_entry > self.interval_bytes:
            relative = last_offset - self.base_offset
            self.relative_offsets.append(relative)
            self.positions.append(position)
            self.bytes_since_last_entry = 0
            entry = ENTRY.pack(relative, position)
        self.bytes_since_last_entry += batch_size
        return entry

    def lookup(self, offset: int) -> int:
        """File position from which to scan for the batch holding `offset` (0 if before every entry)."""
        i = bisect.bisect_right(self.relative_offsets, offset - self.base_offset)
        return self.positions[i - 1] if i else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or after `position` (the log was truncated there)."""
        i = bisect.bisect_left(self.positions, position)
        del self.relative_offsets[i:]
        del self.positions[i:]
        # Exactly what appending the kept batches would have counted, so a rebuild agrees.
        self.bytes_since_last_entry = position - (self.positions[-1] if self.positions else 0)

    def to_bytes(self) -> bytes:
        return b"".join(ENTRY.pack(r, p) for r, p in zip(self.relative_offsets, self.positions, strict=True))

    @staticmethod
    def parse(data: bytes) -> list[tuple[int, int]]:
        usable = len(data) - len(data) % ENTRY.size
        return [ENTRY.unpack_from(data, i) for i in range(0, usable, ENTRY.size)]
