"""Opening a partition's segments: recovery where the log may be torn, trust where it cannot be.

As Kafka's LogLoader (storage/.../log/LogLoader.java, `load` / `loadSegmentFiles` / `recoverLog`):
- after a clean shutdown (the log manager found `.kafka_cleanshutdown`) no segment is scanned: each
  is opened from its index files, which the clean close wrote whole and fsynced;
- after a crash, only the segments from the one holding the checkpointed recovery point on
  (`recovery-point-offset-checkpoint`, LogLoader's `segments.values(recoveryPointCheckpoint, MAX)`)
  are recovered: every batch CRC-checked, a torn or corrupt tail cut, the indexes rebuilt; the
  segments before it were fsynced with their indexes before the checkpoint named that offset.

A trusted segment is still sanity-checked, as Kafka's LogSegment.sanityCheck / OffsetIndex.sanityCheck /
TimeIndex.sanityCheck do (whole entries, offsets not below the base) and more: entries strictly
increasing and inside the file, and the segment's end found as Kafka's LogSegment.readNextOffset finds
it, by reading from the last offset-index entry to the end of the file — here with each of those tail
batches CRC-checked, the last entry re-derived from the batch it points at, the scan ending exactly at
the file's size and no batch there newer than the time index's last entry (a segment's largest
timestamp, which roll and close append: LogSegment.onBecomeInactiveSegment). A segment that fails
any check is recovered instead, as LogLoader does on a CorruptIndexException.
"""
from __future__ import annotations

import logging
import os

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.records import HEADER_SIZE, batch_crc, parse_batch_header
from kcoord.storage.fs import FS
from kcoord.storage.index import OffsetIndex, TimeIndex
from kcoord.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIMEINDEX_SUFFIX,
    LogSegment,
    SegmentState,
    scan_batches,
)

log = logging.getLogger("kcoord.storage")

LEFTOVER_SUFFIXES = (CLEANED_SUFFIX, ".swap", ".deleted")


class LogLoader:
    def __init__(self, fs: FS, directory: str, name: str, index_interval_bytes: int,
                 had_clean_shutdown: bool = False, recovery_point_checkpoint: int = 0) -> None:
        self.fs = fs
        self.directory = directory
        self.name = name
        self.index_interval_bytes = index_interval_bytes
        self.had_clean_shutdown = had_clean_shutdown
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.recovered: list[LogSegment] = []  # scanned rather than trusted
        self.trusted = 0

    def load(self) -> list[LogSegment]:
        """The directory's segments in offset order, recovered or trusted (see the module docstring)."""
        bases = self._remove_leftovers()
        first_to_recover = self._first_to_recover(bases)
        segments: list[LogSegment] = []
        expected = 0
        for i, base in enumerate(bases):
            segment = LogSegment(self.fs, self.directory, base, self.index_interval_bytes)
            segments.append(segment)
            if base < first_to_recover:
                if open_trusted(segment, expected):
                    self.trusted += 1
                    expected = segment.next_offset
                    continue
                log.warning("%s: segment %d failed its sanity check; recovering it", self.name, base)
            self.recovered.append(segment)
            dropped = segment.recover(expected)
            expected = segment.next_offset
            if dropped and i < len(bases) - 1:
                # Corruption inside the log (not a torn tail): as Kafka does, nothing after it is kept.
                later = bases[i + 1:]
                log.error("%s: corrupt segment %d; deleting %d later segments %s",
                          self.name, base, len(later), later)
                for other in later:
                    LogSegment(self.fs, self.directory, other, self.index_interval_bytes).delete()
                break
        return segments

    def _first_to_recover(self, bases: list[int]) -> float:
        """Base offset of the first segment to recover: none after a clean shutdown; else the one
        holding the recovery point (every segment if the point is below the first)."""
        if self.had_clean_shutdown:
            return float("inf")
        holding = [b for b in bases if b <= self.recovery_point_checkpoint]
        return holding[-1] if holding else float("-inf")

    def _remove_leftovers(self) -> list[int]:
        names = self.fs.listdir(self.directory)
        for name in names:
            if name.endswith(LEFTOVER_SUFFIXES):
                # A crash mid-clean (or mid-delete) left this; the original segment is intact.
                log.warning("%s: removing leftover %s", self.name, name)
                self.fs.remove(os.path.join(self.directory, name))
        bases = sorted(int(n[:-len(LOG_SUFFIX)]) for n in names
                       if n.endswith(LOG_SUFFIX) and n[:-len(LOG_SUFFIX)].isdigit())
        live = {f"{b:020d}" for b in bases}
        for name in names:
            stem, _, suffix = name.partition(".")
            if "." + suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX) and stem not in live:
                self.fs.remove(os.path.join(self.directory, name))  # index of a segment that is gone
        return bases


def _read_all(fs: FS, fd: int) -> bytes:
    return fs.pread(fd, fs.size(fd), 0)


def _strictly_increasing(values) -> bool:
    return all(a < b for a, b in zip(values, values[1:], strict=False))


def open_trusted(segment: LogSegment, min_offset: int) -> bool:
    """Take the segment's state from its index files and the batches after the last offset-index
    entry; False (segment untouched) when a sanity check fails."""
    fs, base = segment.fs, segment.base_offset
    file_size = fs.size(segment.fd)
    index_bytes, time_bytes = _read_all(fs, segment.index_fd), _read_all(fs, segment.timeindex_fd)
    if len(index_bytes) % OffsetIndex.entry.size or len(time_bytes) % TimeIndex.entry.size:
        return False
    entries = OffsetIndex.parse(index_bytes)      # (relative offset, position)
    time_entries = TimeIndex.parse(time_bytes)    # (timestamp, relative offset)
    relatives, positions = [r for r, _ in entries], [p for _, p in entries]
    stamps, stamp_offsets = [t for t, _ in time_entries], [r for _, r in time_entries]
    if entries and not (relatives[0] >= 0 and positions[0] > 0 and positions[-1] < file_size
                        and _strictly_increasing(relatives) and _strictly_increasing(positions)):
        return False
    if time_entries and not (stamps[0] >= 0 and stamp_offsets[0] >= 0
                             and _strictly_increasing(stamps) and _strictly_increasing(stamp_offsets)):
        return False
    state = SegmentState(base, segment.index_interval_bytes)
    if file_size == 0:
        if entries or time_entries:
            return False
        segment.state = state
        return True
    try:
        first = parse_batch_header(fs.pread(segment.fd, HEADER_SIZE, 0))
    except DecodeError:
        return False
    if first.base_offset < max(min_offset, base):
        return False
    state.rolling_timestamp = first.max_timestamp
    for timestamp, relative in time_entries:
        state.time_index.maybe_add(timestamp, base + relative)
    if time_entries:
        state.max_timestamp, state.offset_of_max_timestamp = stamps[-1], base + stamp_offsets[-1]
    closing = (state.max_timestamp, state.offset_of_max_timestamp)
    start = 0
    if entries:
        # Every entry but the last as written; the last is re-derived from the batch it points at.
        state.index.relative_offsets.extend(relatives[:-1])
        state.index.positions.extend(positions[:-1])
        state.index.bytes_since_last_entry = segment.index_interval_bytes + 1
        start = positions[-1]
    expected = first.base_offset
    try:
        for position, header, batch in scan_batches(lambda size, at: fs.pread(segment.fd, size, at),
                                                     start, file_size):
            if (header.base_offset < expected or batch_crc(batch) != header.crc
                    or header.last_offset - base > MAX_RELATIVE_OFFSET):
                return False
            expected = header.next_offset
            state.track(header, position)
    except DecodeError:
        return False
    if (state.size != file_size or (state.max_timestamp, state.offset_of_max_timestamp) != closing
            or len(state.index) != len(entries)
            or (entries and state.index.relative_offsets[-1] != relatives[-1])
            or (time_entries and state.offset_of_max_timestamp >= state.next_offset)):
        return False
    segment.state = state
    return True
