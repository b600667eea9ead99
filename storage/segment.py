"""One log segment: `<20-digit base offset>.log` (record batches back to back) and its `.index`.

The segment knows positions and offsets; it does not decide when to roll, flush or delete (the
partition log does). All I/O goes through the FS object.
"""
from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator

from protocol.errors import DecodeError
from protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    batch_crc,
    iter_batches,
    parse_batch_header,
)
from storage.fs import FS
from storage.index import OffsetIndex

log = logging.getLogger("kcoord.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
CLEANED_SUFFIX = ".cleaned"
SCAN_CHUNK = 1 << 20
_LENGTH = struct.Struct(">qi")


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    def __init__(self, fs: FS, directory: str, base_offset: int, index_interval_bytes: int) -> None:
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = os.path.join(directory, segment_file_name(base_offset))
        self.index_path = os.path.join(directory, segment_file_name(base_offset, INDEX_SUFFIX))
        self.fd = fs.open(self.log_path)
        self.index_fd = fs.open(self.index_path)
        self.index = OffsetIndex(base_offset, index_interval_bytes)
        self.size = 0
        self.next_offset = base_offset  # one past the last offset held here
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.rolling_timestamp: int | None = None  # first batch's max timestamp: segment.ms rolls
        self.closed = False

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
        position = start
        entries = []
        for header in headers:
            self._account(header, position)
            entry = self.index.maybe_add(header.last_offset, position, header.size)
            if entry is not None:
                entries.append(entry)
            position += header.size
        self.size = position
        if entries:
            self._write_index_entries(b"".join(entries), len(self.index) - len(entries))

    def _account(self, header: BatchHeader, position: int) -> None:
        if self.rolling_timestamp is None:
            self.rolling_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        self.next_offset = header.next_offset

    def _cut_back(self, size: int) -> None:
        try:
            self.fs.truncate(self.fd, size)
        except OSError:
            # The torn bytes stay on disk past self.size: reads never look there, the next append
            # overwrites them, and recovery would drop them as a torn tail.
            log.exception("could not truncate %s back to %d after a failed write", self.log_path, size)

    def _write_index_entries(self, data: bytes, first_entry: int) -> None:
        try:
            self.fs.write_all(self.index_fd, data, first_entry * 8)
        except OSError:
            # The index is derived data: recovery notices the mismatch and rebuilds it.
            log.warning("could not write index entries to %s", self.index_path, exc_info=True)

    # -- reading --------------------------------------------------------------------------------

    def scan(self, start: int = 0, end: int | None = None,
             chunk_size: int = SCAN_CHUNK) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """Yield (position, header, batch view) of whole batches in [start, end); stops at a torn tail.

        Raises DecodeError where the bytes are not a batch header (bad magic or length).
        """
        end = self.size if end is None else end
        position = start
        while end - position >= LOG_OVERHEAD:
            chunk = self.fs.pread(self.fd, min(chunk_size, end - position), position)
            consumed = 0
            for at, header, batch in iter_batches(chunk):
                yield position + at, header, batch
                consumed = at + header.size
            if consumed == 0:
                # The next batch is larger than a chunk (or torn): read exactly that one.
                if len(chunk) < LOG_OVERHEAD:
                    return
                size = _LENGTH.unpack_from(chunk)[1] + LOG_OVERHEAD
                if size < LOG_OVERHEAD or size > end - position:
                    if size <= LOG_OVERHEAD:
                        raise DecodeError(f"bad batch length {size - LOG_OVERHEAD}", offset=position)
                    return
                whole = self.fs.pread(self.fd, size, position)
                if len(whole) < size:
                    return
                header = parse_batch_header(whole)
                yield position, header, memoryview(whole)
                consumed = size
            position += consumed

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= offset, if any."""
        # The target is usually within index.interval.bytes of the entry: read little at a time.
        chunk = max(2 * self.index.interval_bytes, 16384)
        for position, header, _ in self.scan(self.index.lookup(offset), chunk_size=chunk):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, position: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches from `position`, up to max_bytes, but at least one batch (as Kafka does).

        Batches starting at or after max_offset (e.g. a high watermark) are left out.
        """
        limit = self.size - position
        if limit <= 0:
            return b""
        data = self.fs.pread(self.fd, min(max(max_bytes, 0), limit), position)
        end = 0
        for at, header, _ in iter_batches(data):
            if max_offset is not None and header.base_offset >= max_offset:
                break
            end = at + header.size
        if end == 0:
            # The first batch alone is larger than max_bytes: return it whole.
            head = self.fs.pread(self.fd, min(HEADER_SIZE, limit), position)
            header = parse_batch_header(head) if len(head) == HEADER_SIZE else None
            if header is None or (max_offset is not None and header.base_offset >= max_offset):
                return b""
            return self.fs.pread(self.fd, header.size, position)
        return data[:end]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, BatchHeader, memoryview] | None:
        """The first batch whose max timestamp is >= timestamp, with its position."""
        if self.max_timestamp < timestamp:
            return None
        for position, header, batch in self.scan():
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

    def _reset_tracking(self, position: int, write_index: bool = True) -> None:
        """Recompute offsets, timestamps and the index for the bytes in [0, position)."""
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self.rolling_timestamp = None
        self.index = OffsetIndex(self.base_offset, self.index.interval_bytes)
        for at, header, _ in self.scan(0, position):
            self._account(header, at)
            self.index.maybe_add(header.last_offset, at, header.size)
            self.size = at + header.size
        if write_index:
            self._rewrite_index()

    def recover(self, min_offset: int) -> int:
        """CRC-check every batch; cut a torn or corrupt tail; rebuild the index if it disagrees.

        Returns the number of bytes dropped. Batches must have base offsets >= min_offset and
        increasing (compaction leaves gaps, so not contiguous); the first one that breaks a rule
        ends the valid part of the segment. One pass: tracking and index are rebuilt as it goes.
        """
        file_size = self.fs.size(self.fd)
        self._reset_tracking(0, write_index=False)
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
                expected = header.next_offset
                self._account(header, position)
                self.index.maybe_add(header.last_offset, position, header.size)
                self.size = position + header.size
        except DecodeError as exc:
            reason = str(exc)
        dropped = file_size - self.size
        if dropped:
            log.warning("recovering %s: dropped %d bytes after position %d (%s)",
                        self.log_path, dropped, self.size, reason)
            self.fs.truncate(self.fd, self.size)
        if self.fs.pread(self.index_fd, self.fs.size(self.index_fd), 0) != self.index.to_bytes():
            log.info("rebuilding index %s (%d entries)", self.index_path, len(self.index))
            self._rewrite_index()
        return dropped

    def _rewrite_index(self) -> None:
        data = self.index.to_bytes()
        try:
            self.fs.truncate(self.index_fd, 0)
            self.fs.write_all(self.index_fd, data, 0)
        except OSError:
            log.warning("could not rewrite index %s", self.index_path, exc_info=True)

    def reopen(self) -> SegmentFiles:
        """Re-open the files after the `.log` was replaced by a rename (compaction).

        Returns the old descriptors still open, for the caller to close once no worker uses them.
        """
        old = SegmentFiles(self.fs, self.fd, self.index_fd)
        self.fd = self.fs.open(self.log_path)
        self.index_fd = self.fs.open(self.index_path)
        self._reset_tracking(self.fs.size(self.fd))
        return old

    def flush(self) -> None:
        self.fs.fsync(self.fd)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.fs.close(self.fd)
            self.fs.close(self.index_fd)

    def delete(self) -> None:
        self.close()
        self.fs.remove(self.log_path)
        self.fs.remove(self.index_path)


class SegmentFiles:
    """A segment's superseded descriptors, closed later (see LogSegment.reopen)."""

    def __init__(self, fs: FS, fd: int, index_fd: int) -> None:
        self.fs, self.fd, self.index_fd = fs, fd, index_fd

    def close(self) -> None:
        self.fs.close(self.fd)
        self.fs.close(self.index_fd)
