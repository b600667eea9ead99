"""One log segment: `<20-digit base offset>.log` (record batches back to back), `.index`, `.timeindex`.

The segment knows positions and offsets; it does not decide when to roll, flush or delete (the
partition log does). All I/O goes through the FS object.
"""
from __future__ import annotations

import bisect
import logging
import os
import struct
from collections.abc import Callable, Iterator

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    batch_crc,
    iter_batches,
    parse_batch_header,
)
from kcoord.storage.fs import FS
from kcoord.storage.index import OffsetIndex, TimeIndex

log = logging.getLogger("kcoord.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SCAN_CHUNK = 1 << 20
LOOKUP_CHUNK = 16384  # a few index intervals (4 KiB by default) around an index entry
# Index entries are written to their files this many at a time (one system call instead of two per
# append on the coordinator's hot path: an append of a commit usually makes one entry of each index).
INDEX_WRITE_BATCH = 64
_LENGTH = struct.Struct(">qi")
MAX_RELATIVE_OFFSET = 2**31 - 1  # index entries hold offsets relative to the base as int32


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def scan_batches(pread: Callable[[int, int], bytes], start: int, end: int,
                 chunk_size: int = SCAN_CHUNK) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Yield (position, header, batch view) of whole batches in [start, end) of a file, reading it
    in chunks through pread(size, position). Stops quietly at a torn tail; raises DecodeError
    where the bytes are not a batch header (bad magic or length). CRCs are not checked here.
    """
    position = start
    while end - position >= LOG_OVERHEAD:
        chunk = pread(min(chunk_size, end - position), position)
        consumed = 0
        for at, header, batch in iter_batches(chunk):
            yield position + at, header, batch
            consumed = at + header.size
        if consumed == 0:
            # The next batch is larger than a chunk (or torn): read exactly that one.
            if len(chunk) < LOG_OVERHEAD:
                return
            size = _LENGTH.unpack_from(chunk)[1] + LOG_OVERHEAD
            if size <= LOG_OVERHEAD:
                raise DecodeError(f"bad batch length {size - LOG_OVERHEAD}", offset=position)
            if size > end - position:
                return
            whole = pread(size, position)
            if len(whole) < size:
                return
            yield position, parse_batch_header(whole), memoryview(whole)
            consumed = size
        position += consumed


class SegmentState:
    """What a segment knows about its batches — built as they are appended, by a recovery scan,
    or by the cleaner for the copy it writes (so a swap need not rescan on the event loop)."""

    __slots__ = ("size", "next_offset", "max_timestamp", "offset_of_max_timestamp", "rolling_timestamp",
                 "index", "time_index")

    def __init__(self, base_offset: int, index_interval_bytes: int) -> None:
        self.size = 0
        self.next_offset = base_offset  # one past the last offset held
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.rolling_timestamp: int | None = None  # first batch's max timestamp: segment.ms rolls
        self.index = OffsetIndex(base_offset, index_interval_bytes)
        self.time_index = TimeIndex(base_offset)

    def track(self, header: BatchHeader, position: int) -> tuple[bytes | None, bytes | None]:
        """Account for a batch at `position`; returns the index entries (bytes) it caused, if any."""
        if self.rolling_timestamp is None:
            self.rolling_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        self.next_offset = header.next_offset
        self.size = position + header.size
        entry = self.index.maybe_add(header.last_offset, position, header.size)
        if entry is None:
            return None, None
        return entry, self.time_index.maybe_add(self.max_timestamp, self.offset_of_max_timestamp)

    def seal(self) -> bytes | None:
        """Give the time index an entry for the segment's largest timestamp, if it lacks one (Kafka's
        LogSegment.onBecomeInactiveSegment / close append it): its last entry is then the segment's
        max timestamp, which a clean open takes from it instead of scanning. The entry bytes, if new."""
        return self.time_index.maybe_add(self.max_timestamp, self.offset_of_max_timestamp)


class LogSegment:
    def __init__(self, fs: FS, directory: str, base_offset: int, index_interval_bytes: int) -> None:
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = os.path.join(directory, segment_file_name(base_offset))
        self.index_path = os.path.join(directory, segment_file_name(base_offset, INDEX_SUFFIX))
        self.timeindex_path = os.path.join(directory, segment_file_name(base_offset, TIMEINDEX_SUFFIX))
        self.fd = fs.open(self.log_path)
        self.index_fd = fs.open(self.index_path)
        self.timeindex_fd = fs.open(self.timeindex_path)
        self.index_interval_bytes = index_interval_bytes
        self.state = SegmentState(base_offset, index_interval_bytes)
        self.closed = False
        # The index files were written since their last fsync (a clean close and the recovery-point
        # checkpoint fsync them: a segment opened without a scan trusts them).
        self.indexes_dirty = False
        self._indexes_broken = False  # a write of entries failed: rewrite the files whole next time
        # index entries not yet in their files: written INDEX_WRITE_BATCH at a time, on roll and on close
        self._index_tail: list[bytes] = []
        self._time_index_tail: list[bytes] = []

    # What the log reads about the segment lives in its state.
    size = property(lambda self: self.state.size)
    next_offset = property(lambda self: self.state.next_offset)
    max_timestamp = property(lambda self: self.state.max_timestamp)
    offset_of_max_timestamp = property(lambda self: self.state.offset_of_max_timestamp)
    rolling_timestamp = property(lambda self: self.state.rolling_timestamp)
    index = property(lambda self: self.state.index)
    time_index = property(lambda self: self.state.time_index)

    def __repr__(self) -> str:
        return f"LogSegment({self.base_offset}, size={self.size}, next_offset={self.next_offset})"

    # -- appending ------------------------------------------------------------------------------

    def append(self, data, headers: list[BatchHeader]) -> None:
        """Write whole batches at the end; on failure cut back to the old end and re-raise."""
        start = self.size
        try:
            self.fs.write_all(self.fd, data, start)
        except BaseException:
            self._cut_back(start)
            raise
        index_entries, time_entries = [], []
        position = start
        for header in headers:
            entry, time_entry = self.state.track(header, position)
            if entry is not None:
                index_entries.append(entry)
            if time_entry is not None:
                time_entries.append(time_entry)
            position += header.size
        if index_entries:
            self._index_tail += index_entries
            self._time_index_tail += time_entries
            if len(self._index_tail) >= INDEX_WRITE_BATCH:
                self.write_index_tail()

    def write_index_tail(self) -> None:
        """Write the index entries made since the last time (as Kafka's memory-mapped indexes reach the
        file when they are flushed). Reads use the in-memory indexes; after a crash, recovery
        rebuilds a file that falls short."""
        if self._indexes_broken:
            self._rewrite_indexes()
            return
        if self._index_tail:
            self._write_entries(self.index_fd, self.index_path, self._index_tail,
                                len(self.index) - len(self._index_tail), self.index.entry_size)
            self._index_tail = []
        if self._time_index_tail:
            self._write_entries(self.timeindex_fd, self.timeindex_path, self._time_index_tail,
                                len(self.time_index) - len(self._time_index_tail), self.time_index.entry_size)
            self._time_index_tail = []

    def seal(self) -> None:
        """The time index's closing entry (see SegmentState.seal), then every pending entry to the files:
        on roll and on close."""
        entry = self.state.seal()
        if entry is not None:
            self._time_index_tail.append(entry)
        self.write_index_tail()

    def sync_indexes(self) -> None:
        """fsync the index files if they changed since the last time; OSError also if a write of
        them failed (their files may not hold what memory does)."""
        if self._indexes_broken:
            raise OSError(f"index files of {self.log_path} could not be written")
        if self.indexes_dirty:
            self.fs.fsync(self.index_fd)
            self.fs.fsync(self.timeindex_fd)
            self.indexes_dirty = False

    def _cut_back(self, size: int) -> None:
        try:
            self.fs.truncate(self.fd, size)
        except OSError:
            # The torn bytes stay on disk past self.size: reads never look there, the next append
            # overwrites them, and recovery would drop them as a torn tail.
            log.exception("could not truncate %s back to %d after a failed write", self.log_path, size)

    def _write_entries(self, fd: int, path: str, entries: list[bytes], first: int, entry_size: int) -> None:
        self.indexes_dirty = True
        try:
            self.fs.write_all(fd, b"".join(entries), first * entry_size)
        except OSError:
            # Indexes are derived data: the next roll or close rewrites them whole, and a recovery
            # (or a clean open's sanity check) notices a file that still disagrees.
            self._indexes_broken = True
            log.warning("could not write index entries to %s", path, exc_info=True)

    # -- reading --------------------------------------------------------------------------------

    def scan(self, start: int = 0, end: int | None = None,
             chunk_size: int = SCAN_CHUNK) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """Whole batches in [start, end) of this segment; see scan_batches."""
        fd, pread = self.fd, self.fs.pread
        return scan_batches(lambda size, position: pread(fd, size, position), start,
                            self.size if end is None else end, chunk_size)

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= offset, if any."""
        # The target is usually within index.interval.bytes of the entry: read little at a time.
        for position, header, _ in self.scan(self.index.lookup(offset), chunk_size=LOOKUP_CHUNK):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, position: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches from `position` (a batch start), up to max_bytes, but at least one batch
        (as Kafka does). Batches starting at or after max_offset (e.g. a high watermark) are left out.

        Only the batch headers near the cut are parsed (found through the offset index), so a
        fetch of many small batches costs one read, not one parse per batch.
        """
        end = self.size
        if max_offset is not None and max_offset < self.next_offset:
            found = self.find_position(max_offset)
            if found is not None:
                at, header = found
                end = at if header.base_offset >= max_offset else at + header.size
        if end <= position:
            return b""
        if end - position <= max_bytes:
            return self.fs.pread(self.fd, end - position, position)
        limit = position + max(max_bytes, 0)
        # Start from the last indexed batch start within the limit: all before it fits.
        positions = self.index.positions
        i = bisect.bisect_right(positions, limit) - 1
        cut = max(position, positions[i] if i >= 0 else 0)
        for at, header, _ in self.scan(cut, end, chunk_size=LOOKUP_CHUNK):
            if at + header.size > limit:
                break
            cut = at + header.size
        if cut == position:
            # The first batch alone is larger than max_bytes: return it whole.
            head = parse_batch_header(self.fs.pread(self.fd, HEADER_SIZE, position))
            cut = position + head.size
        return self.fs.pread(self.fd, cut - position, position)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, BatchHeader, memoryview] | None:
        """The first batch whose max timestamp is >= timestamp, with its position."""
        if self.max_timestamp < timestamp:
            return None
        older_up_to = self.time_index.lookup(timestamp)
        start = 0 if older_up_to is None else self.index.lookup(older_up_to)
        for position, header, batch in self.scan(start):
            if header.max_timestamp >= timestamp:
                return position, header, batch
        return None

    # -- truncation, recovery, lifecycle --------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding offsets >= offset; returns the bytes removed."""
        found = self.find_position(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        self.fs.truncate(self.fd, position)
        self._reset_tracking(position)
        return removed

    def _reset_tracking(self, position: int, write_indexes: bool = True) -> None:
        """Recompute offsets, timestamps and indexes for the bytes in [0, position)."""
        self._clear_tracking()
        for at, header, _ in self.scan(0, position):
            self.state.track(header, at)
        if write_indexes:
            self._rewrite_indexes()

    def _clear_tracking(self) -> None:
        self.state = SegmentState(self.base_offset, self.index_interval_bytes)
        self._index_tail, self._time_index_tail = [], []  # what follows rewrites or checks the files

    def recover(self, min_offset: int) -> int:
        """CRC-check every batch; cut a torn or corrupt tail; rebuild indexes that disagree.

        Returns the number of bytes dropped. Batches must have base offsets >= min_offset and
        increasing (compaction leaves gaps, so not contiguous); the first one that breaks a rule
        ends the valid part of the segment. One pass: tracking and indexes are rebuilt as it goes.
        """
        file_size = self.fs.size(self.fd)
        self._clear_tracking()
        expected = max(min_offset, self.base_offset)
        reason = "torn batch"
        try:
            for position, header, batch in self.scan(0, file_size):
                if header.base_offset < expected:
                    reason = f"offset {header.base_offset} below expected {expected}"
                    break
                if batch_crc(batch) != header.crc:
                    reason = f"CRC mismatch in batch at offset {header.base_offset}"
                    break
                if header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    # The base offset is outside the CRC: a damaged one can only be caught here (Kafka:
                    # LogSegmentOffsetOverflowException).
                    reason = f"offset {header.last_offset} out of the segment's range"
                    break
                expected = header.next_offset
                self.state.track(header, position)
        except DecodeError as exc:
            reason = str(exc)
        dropped = file_size - self.size
        if dropped:
            log.warning("recovering %s: dropped %d bytes after position %d (%s)",
                        self.log_path, dropped, self.size, reason)
            self.fs.truncate(self.fd, self.size)
        self.state.seal()
        for fd, path, index in self._index_files():
            if self.fs.pread(fd, self.fs.size(fd), 0) != index.to_bytes():
                log.info("rebuilding %s (%d entries)", path, len(index))
                self._rewrite_index(fd, path, index)
        return dropped

    def _index_files(self) -> list[tuple[int, str, OffsetIndex | TimeIndex]]:
        return [(self.index_fd, self.index_path, self.index),
                (self.timeindex_fd, self.timeindex_path, self.time_index)]

    def _rewrite_indexes(self) -> None:
        self._index_tail, self._time_index_tail = [], []
        self._indexes_broken = False
        self.state.seal()
        for fd, path, index in self._index_files():
            self._rewrite_index(fd, path, index)

    def _rewrite_index(self, fd: int, path: str, index: OffsetIndex | TimeIndex) -> None:
        self.indexes_dirty = True
        try:
            self.fs.truncate(fd, 0)
            self.fs.write_all(fd, index.to_bytes(), 0)
        except OSError:
            self._indexes_broken = True
            log.warning("could not rewrite index %s", path, exc_info=True)

    def reopen(self, state: SegmentState | None = None) -> SegmentFiles:
        """Re-open the files after the `.log` was replaced by a rename (compaction), taking `state`
        as the new content's (else rescanning it), and rewrite the indexes.

        Returns the old descriptors still open, for the caller to close once no worker uses them.
        """
        old = SegmentFiles(self.fs, [self.fd, self.index_fd, self.timeindex_fd])
        self.fd = self.fs.open(self.log_path)
        self.index_fd = self.fs.open(self.index_path)
        self.timeindex_fd = self.fs.open(self.timeindex_path)
        if state is None:
            self._reset_tracking(self.fs.size(self.fd))
        else:
            self.state = state
            self._rewrite_indexes()
        return old

    def flush(self) -> None:
        self.fs.fsync(self.fd)

    def close(self) -> None:
        if not self.closed:
            self.write_index_tail()
            self.closed = True
            SegmentFiles(self.fs, [self.fd, self.index_fd, self.timeindex_fd]).close()

    def delete(self) -> None:
        self._index_tail, self._time_index_tail = [], []
        self.close()
        for path in (self.log_path, self.index_path, self.timeindex_path):
            self.fs.remove(path)


class SegmentFiles:
    """Open descriptors of a segment, closed together (later, for superseded ones; see reopen)."""

    def __init__(self, fs: FS, fds: list[int]) -> None:
        self.fs, self.fds = fs, fds

    def close(self) -> None:
        for fd in self.fds:
            self.fs.close(fd)
