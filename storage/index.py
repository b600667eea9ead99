"""Sparse indexes of one segment, both derived from its `.log` and mirrored to files in Kafka's
formats: `.index` (relative offset int32, file position int32) and `.timeindex` (timestamp int64,
relative offset int32).

As in Kafka, an offset-index entry is added when more than index.interval.bytes of batches were
appended since the last one, and it maps the *last* offset of the batch starting at that
position; a lookup for offset X gives the greatest entry with offset <= X, where the scan for X
starts. At the same moments the time index records the segment's largest timestamp so far and
the offset where it was reached, only when that timestamp grew. Both are derived data: recovery
rebuilds them whenever they are missing or disagree with the log, so they are never fsynced on
the append path.
"""
from __future__ import annotations

import bisect
import struct
from array import array

ENTRY = struct.Struct(">ii")  # relative offset, file position
TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset


class _SparseIndex:
    """Two parallel int columns serialised as fixed-size big-endian entries."""

    entry: struct.Struct

    def _columns(self) -> tuple[array, array]:
        raise NotImplementedError

    @property
    def entry_size(self) -> int:
        return self.entry.size

    def to_bytes(self) -> bytes:
        pack = self.entry.pack
        first, second = self._columns()
        return b"".join(pack(a, b) for a, b in zip(first, second, strict=True))

    @classmethod
    def parse(cls, data: bytes) -> list[tuple[int, int]]:
        return list(cls.entry.iter_unpack(data[:len(data) - len(data) % cls.entry.size]))


class OffsetIndex(_SparseIndex):
    """In-memory offset index of one segment, mirrored to its `.index` file."""

    entry = ENTRY

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

    def _columns(self) -> tuple[array, array]:
        return self.relative_offsets, self.positions


class TimeIndex(_SparseIndex):
    """In-memory time index of one segment, mirrored to its `.timeindex` file."""

    entry = TIME_ENTRY

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.relative_offsets = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    def maybe_add(self, max_timestamp: int, offset_of_max: int) -> bytes | None:
        """Record (largest timestamp so far, its offset) if the timestamp grew; the entry bytes."""
        if max_timestamp < 0 or (self.timestamps and max_timestamp <= self.timestamps[-1]):
            return None
        relative = offset_of_max - self.base_offset
        self.timestamps.append(max_timestamp)
        self.relative_offsets.append(relative)
        return TIME_ENTRY.pack(max_timestamp, relative)

    def lookup(self, timestamp: int) -> int | None:
        """An offset at or before which every record is older than `timestamp` (None: unknown).

        From the last entry whose timestamp is < timestamp: up to its offset, nothing in the
        segment was that new, so a search may start there.
        """
        i = bisect.bisect_left(self.timestamps, timestamp)
        return self.base_offset + self.relative_offsets[i - 1] if i else None

    def _columns(self) -> tuple[array, array]:
        return self.timestamps, self.relative_offsets
