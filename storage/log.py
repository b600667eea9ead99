"""PartitionLog: one topic-partition's log — segments, append with group commit, read, recovery,
truncation, retention, and the owner side of compaction.

Threading model: the log is owned by one thread (the event loop). Worker threads only run the
blocking fsyncs of a group commit and the read-only part of a compaction; while they run, the log
is "pinned" and segments it drops are closed only afterwards, so a worker never sees a closed fd.
"""
from __future__ import annotations

import asyncio
import bisect
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Executor
from typing import Any

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.records import (
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    iter_batches,
    iter_record_tuples,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from kcoord.storage import cleaner
from kcoord.storage.config import LogConfig
from kcoord.storage.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from kcoord.storage.fs import FS
from kcoord.storage.fsync_pool import FsyncPool
from kcoord.storage.group_commit import GroupCommit
from kcoord.storage.leader_epochs import LeaderEpochCache
from kcoord.storage.log_loader import LogLoader
from kcoord.storage.segment import (
    CLEANED_SUFFIX,
    MAX_RELATIVE_OFFSET,
    LogSegment,
    SegmentFiles,
)

log = logging.getLogger("kcoord.storage")

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


def _raise_as_storage_error(name: str, exc: BaseException):
    """Re-raise a failed clean: OS and decode errors as StorageError, anything else unchanged."""
    if isinstance(exc, (OSError, DecodeError)):
        raise StorageError(f"{name}: compaction failed: {exc}") from exc
    raise exc


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclasses.dataclass(frozen=True, slots=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    generation: int = 0      # the log's failure generation when appended (see sync)


@dataclasses.dataclass(slots=True)
class _FlushSnapshot:
    target: int
    generation: int
    fds: list[int]
    fs: FS
    directory: str | None  # fsync the directory too (a segment file was created)

    def run(self) -> None:
        for fd in self.fds:
            self.fs.fsync(fd)
        if self.directory is not None:
            self.fs.fsync_dir(self.directory)


class PartitionLog:
    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig | None = None,
                 fs: FS | None = None, clock: Callable[[], int] = wall_clock_ms,
                 fsync_executor: FsyncPool | Executor | None = None, *, had_clean_shutdown: bool = False,
                 recovery_point_checkpoint: int = 0, defer_open_sync: bool = False) -> None:
        """Opening recovers the segments that may be torn (see kcoord.storage.log_loader): every one by
        default; after a clean shutdown none; else those from `recovery_point_checkpoint` on.
        `defer_open_sync`: the caller runs finish_open() (the fsyncs of what was recovered) before use."""
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config or LogConfig()
        self.fs = fs or FS()
        self.clock = clock
        self.name = f"{topic}-{partition}"
        self._leader_epoch: int | None = None  # resolved with the epoch cache (see leader_epoch)
        self._epochs: LeaderEpochCache | None = None
        self._epoch_assigned = False  # the current epoch has its entry in the cache
        self.generation = 0           # bumped whenever unflushed data is cut away
        self.recovery_point = 0       # everything below this offset is fsynced
        self._segments: list[LogSegment] = []
        self._dir_dirty = False
        self._pins = 0                # background work holding segment fds
        self._pin_lock = threading.Lock()
        self._retired: list[tuple[LogSegment | SegmentFiles, bool]] = []  # (to close, delete too?)
        self._cleaning = False
        self.first_dirty_offset = 0   # compaction: offsets below were cleaned (cleaner checkpoint)
        self.closed = False
        self.offline = False          # a failure left the files in an unknown state: no clean shutdown
        self.on_truncated: Callable[[PartitionLog], None] | None = None  # the manager re-checkpoints
        self._commit = GroupCommit(self, self.name, fsync_executor)
        self.fs.makedirs(directory)
        self._load(had_clean_shutdown, recovery_point_checkpoint, defer_open_sync)

    def __repr__(self) -> str:
        return f"PartitionLog({self.name}, start={self.log_start_offset}, end={self.log_end_offset})"

    # -- opening and recovery -------------------------------------------------------------------

    def _load(self, had_clean_shutdown: bool, recovery_point_checkpoint: int, defer_open_sync: bool) -> None:
        loader = LogLoader(self.fs, self.directory, self.name, self.config.index_interval_bytes,
                           had_clean_shutdown, recovery_point_checkpoint)
        self._segments = loader.load()
        self.loaded_trusted, self.loaded_recovered = loader.trusted, len(loader.recovered)
        if not self._segments:
            self._segments.append(self._new_segment(0))
        self.log_start_offset = self._segments[0].base_offset
        self.first_dirty_offset = self.log_start_offset
        # What recovery kept may sit only in the page cache (a killed process): it is made durable
        # before it counts as such. (Trusted segments were fsynced before the clean-shutdown marker or
        # the recovery-point checkpoint that vouched for them was written.)
        self._unsynced_on_open = [s for s in loader.recovered if s in self._segments]
        self.recovery_point = self.log_end_offset
        if not defer_open_sync:
            self.finish_open()

    @property
    def open_sync_pending(self) -> bool:
        return bool(self._unsynced_on_open) or self._dir_dirty

    def finish_open(self) -> None:
        """fsync what opening recovered, and the directory (blocking; a LogManager runs those of all its
        logs in parallel threads: see defer_open_sync)."""
        if not self.open_sync_pending:
            return
        try:
            for segment in self._unsynced_on_open:
                segment.flush()
            self.fs.fsync_dir(self.directory)
        except OSError as exc:
            raise StorageError(f"{self.name}: fsync on open failed: {exc}") from exc
        self._unsynced_on_open = []
        self._dir_dirty = False

    # -- leader epochs --------------------------------------------------------------------------

    @property
    def leader_epoch(self) -> int:
        """The epoch stamped on every batch appended as leader, as a Kafka leader does (Metadata reports it).
        A cluster node sets it with become_leader. Otherwise (one node), each time the log is opened this
        node becomes its leader again, one epoch above the last one the log holds (a single-node KRaft
        broker's partitions lose and regain their leader across a restart), and the epoch is recorded in
        the cache only by the first append in it: opening and closing without appending keeps the number."""
        if self._leader_epoch is None:
            latest = self.leader_epochs.latest_epoch
            self._leader_epoch = 0 if latest is None else latest + 1
        return self._leader_epoch

    def become_leader(self, epoch: int) -> None:
        """Lead at `epoch` from the log end on: the cache records (epoch, log end offset) at once, and every
        later append() stamps `epoch` (Kafka's Partition.makeLeader -> UnifiedLog.maybeAssignEpochStartOffset
        with the log end offset as the leader epoch start offset). Idempotent for the same epoch (the
        cache keeps the earlier start). The start is recorded even before any record is written: a
        follower asking OffsetForLeaderEpoch for the previous epoch learns that it ended here, and
        end_offset_for_epoch(epoch) answers the log end. An epoch below the latest one the log holds is
        refused (StorageError): leaders' epochs only grow, and Kafka's assign rule would cut the newer
        history away."""
        self._check_open()
        if epoch < 0:
            raise ValueError(f"{self.name}: invalid leader epoch {epoch}")
        cache = self.leader_epochs
        latest = cache.latest_epoch
        if latest is not None and epoch < latest:
            raise StorageError(f"{self.name}: cannot lead at epoch {epoch}, the log already holds epoch {latest}")
        try:
            cache.assign(epoch, self.log_end_offset)
        except OSError as exc:
            raise StorageError(f"{self.name}: cannot write the leader epoch checkpoint: {exc}") from exc
        self._leader_epoch = epoch
        self._epoch_assigned = True

    @property
    def leader_epochs(self) -> LeaderEpochCache:
        """The epoch cache, read from leader-epoch-checkpoint on first use (rebuilt from the batch headers,
        once, for a log written before the file was kept)."""
        if self._epochs is None:
            # Its own file-system layer: the checkpoint is metadata beside the segments, and the faults
            # and counters a test sets on the log's FS (FaultyFS) are about the segments' I/O.
            cache = LeaderEpochCache(FS(), self.directory)
            try:
                if not cache.loaded:
                    cache.rebuild((h.partition_leader_epoch, h.base_offset) for h, _ in self.batches())
                # Entries past the log end (their batches lost with a torn tail, or the async truncation
                # not yet on disk) never happened: LogLoader.load's truncateFromEndAsyncFlush(nextOffset).
                cache.truncate_from_end(self.log_end_offset)
            except OSError as exc:
                raise StorageError(f"{self.name}: cannot write the leader epoch checkpoint: {exc}") from exc
            self._epochs = cache
        return self._epochs

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) of `epoch` in this log (LeaderEpochFileCache.endOffsetFor)."""
        self._check_open()
        return self.leader_epochs.end_offset_for(epoch, self.log_end_offset)

    def _epochs_changed(self, change: str, offset: int) -> None:
        """Truncation or a new log start: the cache follows (only once it was read; a later read rebuilds
        nothing, since the file is there)."""
        if self._epochs is None:
            return
        try:
            getattr(self._epochs, change)(offset)
            self._dir_dirty = True
        except OSError:
            log.warning("%s: could not rewrite the leader epoch checkpoint", self.name, exc_info=True)

    def _new_segment(self, base_offset: int) -> LogSegment:
        segment = LogSegment(self.fs, self.directory, base_offset, self.config.index_interval_bytes)
        self._dir_dirty = True
        return segment

    # -- offsets --------------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # -- append ---------------------------------------------------------------------------------

    def append(self, records, trusted: bool = False) -> AppendInfo:
        """Assign offsets to whole batches and write them to the OS (not yet durable; see sync).

        `trusted`: the batches were built by this process (the coordinator's), so their CRCs are not
        recomputed; their framing is still checked. Bytes from the network are never trusted."""
        self._check_open()
        buf = bytearray(records)
        headers = self._validate(buf, verify=not trusted)
        append_time = self.clock() if self.config.message_timestamp_type == "LogAppendTime" else -1
        first = offset = self.log_end_offset
        epoch = self.leader_epoch
        if not self._epoch_assigned:
            self._check_epoch_not_stale(epoch)
        patched: list[BatchHeader] = []
        position = 0
        for header in headers:
            set_base_offset(buf, offset, position)
            set_partition_leader_epoch(buf, epoch, position)
            attributes, max_timestamp = header.attributes, header.max_timestamp
            if append_time >= 0:
                set_log_append_time(buf, append_time, position)
                attributes |= TIMESTAMP_TYPE_MASK
                max_timestamp = append_time
            patched.append(header._replace(base_offset=offset, partition_leader_epoch=epoch,
                                           attributes=attributes, max_timestamp=max_timestamp))
            offset += header.last_offset_delta + 1
            position += header.size
        self._write(buf, patched)
        if not self._epoch_assigned:  # the first batch of this epoch: where the epoch begins
            try:
                self.leader_epochs.assign(epoch, first)
            except OSError as exc:
                raise StorageError(f"{self.name}: cannot write the leader epoch checkpoint: {exc}") from exc
            self._epoch_assigned = True
            self._dir_dirty = True  # the checkpoint's rename becomes durable with the next flush
        return AppendInfo(first, offset - 1, append_time, self.generation)

    def append_as_follower(self, records) -> AppendInfo:
        """Append batches fetched from the leader as they are (Kafka's UnifiedLog.appendAsFollower: append
        with validateAndAssignOffsets=false): their offsets, partition leader epochs and timestamps are
        kept. Written to the OS like append(); durable through the same group commit (sync(info) /
        sync_future(info)).

        Checked first, nothing written otherwise: whole v2 batches with valid CRCs (CorruptRecordError),
        each stamped with a leader epoch; offsets that never go back -- the first batch at or past the log
        end (UnexpectedAppendOffsetError, as Kafka's UnexpectedAppendOffsetException: the follower must
        truncate first) and each batch past the previous one (OffsetsOutOfOrderError). Gaps are allowed:
        a compacted leader log has them. Each batch's epoch is then recorded in the leader-epoch cache at
        its base offset (UnifiedLog.append's maybeAssignEpochStartOffset per batch, with
        LeaderEpochFileCache.assign's rule: a new epoch, or a conflicting entry replaced)."""
        self._check_open()
        buf = records if isinstance(records, (bytes, bytearray)) else bytes(records)
        headers = self._validate(buf, verify=True, counts_match=False)
        end = self.log_end_offset
        if headers[0].base_offset < end:
            raise UnexpectedAppendOffsetError(
                f"{self.name}: follower append starts at offset {headers[0].base_offset}, below the log end "
                f"{end} (last offset in the append {headers[-1].last_offset})")
        for header in headers:
            if header.base_offset < end:
                raise OffsetsOutOfOrderError(f"{self.name}: batch at offset {header.base_offset} overlaps the "
                                             f"one before it (ending below {end})")
            if header.partition_leader_epoch < 0:
                raise CorruptRecordError(f"{self.name}: replicated batch at offset {header.base_offset} "
                                         f"carries no partition leader epoch")
            end = header.last_offset + 1
        self._write(buf, headers)
        cache = self.leader_epochs
        try:
            for header in headers:
                if cache.assign(header.partition_leader_epoch, header.base_offset):
                    # The leader path checks its epoch against the cache again before it stamps one.
                    self._epoch_assigned = False
        except OSError as exc:
            raise StorageError(f"{self.name}: cannot write the leader epoch checkpoint: {exc}") from exc
        return AppendInfo(headers[0].base_offset, headers[-1].last_offset, -1, self.generation)

    def _check_epoch_not_stale(self, epoch: int) -> None:
        latest = self.leader_epochs.latest_epoch
        if latest is not None and latest > epoch:
            raise StorageError(f"{self.name}: cannot append as leader at epoch {epoch}: the log holds epoch "
                               f"{latest} (become_leader at a current epoch first)")

    def _write(self, buf, headers: list[BatchHeader]) -> None:
        self._maybe_roll(len(buf), headers)
        try:
            self.active_segment.append(buf, headers)
        except OSError as exc:
            raise StorageError(f"{self.name}: write failed: {exc}") from exc

    def _validate(self, buf, verify: bool = True, counts_match: bool = True) -> list[BatchHeader]:
        """`counts_match`: each batch must hold one record per offset it spans (offsets are assigned from
        the header); a follower's batches may hold fewer (compaction keeps a batch's offset span)."""
        headers = []
        end = 0
        try:
            for position, header, _ in iter_batches(buf, verify=verify):
                if counts_match and header.records_count != header.last_offset_delta + 1:
                    # As Kafka's LogValidator: offsets are assigned from the header, so it must
                    # agree with the records it carries.
                    raise CorruptRecordError(f"{self.name}: batch claims {header.last_offset_delta + 1} "
                                             f"offsets but holds {header.records_count} records")
                headers.append(header)
                end = position + header.size
        except DecodeError as exc:
            raise CorruptRecordError(f"{self.name}: invalid record batch: {exc}") from exc
        if not headers or end != len(buf):
            raise CorruptRecordError(f"{self.name}: record set is not whole batches ({len(buf) - end} stray bytes)")
        if len(buf) > self.config.segment_bytes:
            # As Kafka: a record set must fit in one segment (it is never split).
            raise RecordTooLargeError(f"{self.name}: {len(buf)} bytes exceed segment.bytes")
        return headers

    def _maybe_roll(self, size: int, headers: list[BatchHeader]) -> None:
        active = self.active_segment
        if active.size == 0:
            return
        newest = max(h.max_timestamp for h in headers)
        if (active.size + size > self.config.segment_bytes
                or (active.rolling_timestamp is not None
                    and newest - active.rolling_timestamp > self.config.segment_ms)
                or headers[-1].last_offset - active.base_offset > MAX_RELATIVE_OFFSET):
            self.roll()

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        self._check_open()
        active = self.active_segment
        if active.size == 0:
            return active
        try:
            segment = self._new_segment(self.log_end_offset)
        except OSError as exc:
            raise StorageError(f"{self.name}: cannot create segment: {exc}") from exc
        active.write_index_tail()
        self._segments.append(segment)
        log.debug("%s: rolled new segment at %d", self.name, segment.base_offset)
        return segment

    # -- durability -----------------------------------------------------------------------------

    def sync(self, after: AppendInfo | None = None) -> Coroutine[Any, Any, None]:
        """Awaitable that resolves once everything appended before this call (or `after`) is fsynced.

        What it covers is fixed when sync() is *called*, not when it is awaited, so
        `gather(*(log.sync() for log in touched))` right after appending is exact. Concurrent
        callers share one fsync. Raises StorageError if the fsync failed, or if what it covers was
        cut away by an earlier failure.
        """
        if after is not None:
            return self._sync(after.last_offset + 1, after.generation)
        return self._sync(self.log_end_offset if self._segments else 0, self.generation)

    async def _sync(self, target: int, generation: int) -> None:
        self._check_open()
        await self._commit.wait(target, generation)

    def sync_future(self, after: AppendInfo) -> asyncio.Future:
        """`sync(after)` as a future (for a done callback instead of a task per waiter); raises
        StorageError at once if the log is closed."""
        self._check_open()
        return self._commit.future(after.last_offset + 1, after.generation)

    async def append_durable(self, records) -> AppendInfo:
        info = self.append(records)
        if self.config.flush_on_append:
            await self.sync(info)
        return info

    @property
    def fsync_rounds(self) -> int:
        return self._commit.rounds

    def begin_flush(self) -> _FlushSnapshot:
        fds = [s.fd for s in self._segments if s.next_offset > self.recovery_point or s is self.active_segment]
        directory = self.directory if self._dir_dirty else None
        self._dir_dirty = False
        self._pin()
        return _FlushSnapshot(self.log_end_offset, self.generation, fds, self.fs, directory)

    def end_flush(self) -> None:
        self._unpin()

    def flush_succeeded(self, snapshot: _FlushSnapshot) -> None:
        if snapshot.generation == self.generation:
            self.recovery_point = max(self.recovery_point, snapshot.target)

    def flush_failed(self, snapshot: _FlushSnapshot, exc: BaseException) -> None:
        """Cut the log back to its last durable offset: unflushed bytes may be gone from the page
        cache already (a failed fsync can drop them), so they must not be served or acknowledged."""
        if snapshot.directory is not None:
            self._dir_dirty = True
        if snapshot.generation != self.generation:
            return
        log.error("%s: fsync failed (%s); truncating from %d back to durable offset %d",
                  self.name, exc, self.log_end_offset, self.recovery_point)
        self._truncate(self.recovery_point, reason=f"fsync failed: {exc}", cause=exc)

    def flush(self) -> None:
        """Blocking fsync of everything appended so far (shutdown, tests), index files brought up to date."""
        self._check_open()
        self.active_segment.write_index_tail()
        snapshot = self.begin_flush()
        try:
            snapshot.run()
        except OSError as exc:
            self.end_flush()
            self.flush_failed(snapshot, exc)
            raise StorageError(f"{self.name}: fsync failed: {exc}") from exc
        self.end_flush()
        self.flush_succeeded(snapshot)

    # -- reading --------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches from the one holding `offset`, up to max_bytes (at least one batch)."""
        self._check_open()
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self.name}: offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}]")
        i = max(bisect.bisect_right(self._segments, offset, key=lambda s: s.base_offset) - 1, 0)
        try:
            for segment in self._segments[i:]:
                if segment.next_offset <= offset:
                    continue  # compaction may leave gaps
                found = segment.find_position(offset)
                if found is not None:
                    return segment.read(found[0], max_bytes, max_offset)
        except (OSError, DecodeError) as exc:
            raise StorageError(f"{self.name}: read at offset {offset} failed: {exc}") from exc
        return b""

    def batches(self, start_offset: int | None = None,
                max_offset: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every batch holding offsets >= start_offset (default: log start), in order, stopping
        before any batch that starts at or after max_offset. For loading (e.g. the coordinator
        replaying __consumer_offsets): consume it without awaiting in between, as a compaction
        swap may close the segment files it reads."""
        self._check_open()
        start = self.log_start_offset if start_offset is None else start_offset
        end = self.log_end_offset if max_offset is None else max_offset
        for segment in list(self._segments):
            if segment.next_offset <= start:
                continue
            for _, header, batch in segment.scan(segment.index.lookup(start)):
                if header.base_offset >= end:
                    return
                if header.last_offset >= start:
                    yield header, batch

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: the first offset whose timestamp is >= timestamp, with that timestamp.

        -1 (latest) and -2 (earliest) give the end and start offsets with timestamp -1; -3 gives
        the record with the largest timestamp.
        """
        self._check_open()
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset, -1
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == MAX_TIMESTAMP:
            candidates = [s for s in self._segments if s.max_timestamp >= 0]
            if not candidates:
                return None
            best = max(candidates, key=lambda s: s.max_timestamp)
            return self._first_record_at_or_after(best, best.max_timestamp, exact=True)
        for segment in self._segments:
            found = self._first_record_at_or_after(segment, timestamp)
            if found is not None:
                return found
        return None

    def _first_record_at_or_after(self, segment: LogSegment, timestamp: int,
                                  exact: bool = False) -> tuple[int, int] | None:
        found = segment.offset_for_timestamp(timestamp)
        if found is None:
            return None
        _, header, batch = found
        for offset, record_ts, *_ in iter_record_tuples(batch, header):
            if (record_ts == timestamp if exact else record_ts >= timestamp) and offset >= self.log_start_offset:
                return offset, record_ts
        return None

    # -- truncation and retention ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= offset (whole batches). Waiters for removed data fail."""
        self._check_open()
        before = self.log_end_offset
        if offset >= before:
            # Kafka's UnifiedLog.truncateTo cuts the epoch cache at the log end even then: an epoch a
            # leader recorded here without writing anything (become_leader) conflicts with its successor's.
            self._epochs_changed("truncate_from_end", before)
            self._forget_cut_epoch()
            return
        self._truncate(max(offset, self.log_start_offset), reason="truncate_to")
        if self.log_end_offset < before and self.on_truncated is not None:
            # A recovery point checkpointed above the cut would vouch for what is appended there next.
            self.on_truncated(self)

    def _truncate(self, offset: int, reason: str, cause: BaseException | None = None) -> None:
        if offset >= self.log_end_offset:
            return
        try:
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._retire(self._segments.pop(), delete=True)
            self.active_segment.truncate_to(offset)
        except OSError as exc:
            self.closed = self.offline = True
            raise StorageError(f"{self.name}: truncation failed, log taken offline: {exc}") from exc
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.generation += 1
        self._epochs_changed("truncate_from_end", self.log_end_offset)
        self._forget_cut_epoch()
        error = StorageError(f"{self.name}: data cut back to offset {self.log_end_offset} ({reason})")
        error.__cause__ = cause
        self._commit.fail_all(error)

    def _forget_cut_epoch(self) -> None:
        if self._epochs is not None and self._epochs.latest_epoch != self._leader_epoch:
            self._epoch_assigned = False  # the current epoch's entry was cut away with its batches

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords: move the log start offset up to `offset` (never down, never past the log end);
        reads below it fail with OffsetOutOfRangeError at once, and the segments wholly below it go on
        the next retention pass (Kafka's UnifiedLog.maybeIncrementLogStartOffset). The caller makes it
        durable (LogManager.write_log_start_checkpoint). True when it moved."""
        self._check_open()
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(f"{self.name}: cannot move the log start offset to {offset}, "
                                        f"beyond the log end {self.log_end_offset}")
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self.first_dirty_offset = max(self.first_dirty_offset, offset)
        self._epochs_changed("truncate_from_start", offset)
        log.info("%s: log start offset moved to %d", self.name, offset)
        return True

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: drop whole old segments wholly below the log start offset (any policy) and, for
        delete-policy logs, by time and size (Kafka's UnifiedLog.deleteOldSegments).

        Never the active segment, never one not yet durable. Advances log_start_offset.
        """
        self._check_open()
        now = self.clock() if now_ms is None else now_ms
        total = self.size_bytes
        deleted = 0
        while len(self._segments) > 1:
            oldest = self._segments[0]
            if oldest.next_offset > self.recovery_point:
                break
            breached = self._segments[1].base_offset <= self.log_start_offset
            if not breached and not (self.config.delete and self._past_retention(oldest, total, now)):
                break
            self._segments.pop(0)
            total -= oldest.size
            self._retire(oldest, delete=True)
            deleted += 1
        if deleted:
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            self._epochs_changed("truncate_from_start", self.log_start_offset)
            log.info("%s: retention deleted %d segments; log start offset now %d",
                     self.name, deleted, self.log_start_offset)
        return deleted

    def _past_retention(self, oldest: LogSegment, total: int, now: int) -> bool:
        expired = self.config.retention_ms >= 0 and 0 <= oldest.max_timestamp < now - self.config.retention_ms
        oversize = self.config.retention_bytes >= 0 and total - oldest.size >= self.config.retention_bytes
        return expired or oversize or (oldest.size == 0 and oldest.max_timestamp < 0)

    # -- compaction (owner side; the work itself is in kcoord.storage.cleaner) -------------------------

    def cleanable_segments(self) -> list[LogSegment]:
        """Segments the cleaner may rewrite: all but the active one, and only durable ones."""
        out = []
        for segment in self._segments[:-1]:
            if segment.next_offset > self.recovery_point:
                break
            out.append(segment)
        return out

    def dirty_ratio(self) -> float:
        segments = self.cleanable_segments()
        total = sum(s.size for s in segments)
        if total == 0:
            return 0.0
        dirty = sum(s.size for s in segments if s.base_offset >= self.first_dirty_offset)
        return dirty / total

    def needs_compaction(self) -> bool:
        return (self.config.compact and not self._cleaning and not self.closed
                and self.dirty_ratio() >= self.config.min_cleanable_dirty_ratio
                and len(self.cleanable_segments()) > 0)

    def compact(self, now_ms: int | None = None) -> cleaner.CleanStats:
        """Compact now, in this thread (tests, tools)."""
        plan = self._begin_clean(now_ms)
        try:
            results = cleaner.prepare(plan)
        except BaseException as exc:
            self._abort_clean(plan)
            _raise_as_storage_error(self.name, exc)
        return self._finish_clean(plan, results)

    async def compact_async(self, now_ms: int | None = None, executor=None) -> cleaner.CleanStats:
        """Compact with the heavy part in a worker thread; appends and reads go on meanwhile."""
        plan = self._begin_clean(now_ms)
        work = asyncio.get_running_loop().run_in_executor(executor, cleaner.prepare, plan)
        try:
            results = await asyncio.shield(work)
        except BaseException as exc:
            if not work.done():
                # Cancelled: the worker still reads the segments; only once it is done may their
                # files be closed and its output removed.
                await asyncio.wait([work])
            self._abort_clean(plan)
            _raise_as_storage_error(self.name, exc)
        return self._finish_clean(plan, results)

    def _begin_clean(self, now_ms: int | None) -> cleaner.CleanPlan:
        self._check_open()
        if self._cleaning:
            raise StorageError(f"{self.name}: already cleaning")
        self._cleaning = True
        self._pin()
        now = self.clock() if now_ms is None else now_ms
        return cleaner.CleanPlan(self.fs, self.cleanable_segments(), now, self.config.delete_retention_ms,
                                 self.generation)

    def _abort_clean(self, plan: cleaner.CleanPlan) -> None:
        for segment in plan.segments:
            self.fs.remove(segment.log_path + CLEANED_SUFFIX)
        self._cleaning = False
        self._unpin()

    def _finish_clean(self, plan: cleaner.CleanPlan, results: list[cleaner.CleanedSegment]) -> cleaner.CleanStats:
        """Swap cleaned segments in: rename `.cleaned` over `.log` (atomic), then re-open them."""
        stats = cleaner.CleanStats()
        # A truncation meanwhile may have cut into a planned segment: its cleaned copy would bring
        # the cut records back. Then the whole clean is dropped (the next pass redoes it).
        stale = self.closed or plan.generation != self.generation
        try:
            for result in results:
                segment = result.segment
                if stale or segment not in self._segments:
                    self.fs.remove(result.path)  # deleted or truncated away meanwhile
                    continue
                stats.add(result)
                first = segment is self._segments[0]
                if result.size == 0 and not first:
                    self._segments.remove(segment)
                    self.fs.remove(result.path)
                    self._retire(segment, delete=True)
                    continue
                self.fs.rename(result.path, segment.log_path)
                # Old fds may be in a running fsync: close them once unpinned.
                self._retire(segment.reopen(result.state), delete=False)
            # No directory fsync here: should the renames be lost to a power cut, the old segments
            # come back, which are as valid (just not yet compacted).
            if plan.segments and not stale:
                self.first_dirty_offset = max(self.first_dirty_offset, plan.segments[-1].next_offset)
        except OSError as exc:
            raise StorageError(f"{self.name}: swapping cleaned segments failed: {exc}") from exc
        finally:
            self._cleaning = False
            self._unpin()
        log.info("%s: compacted %d segments: %d -> %d bytes, %d records removed",
                 self.name, stats.segments, stats.bytes_before, stats.bytes_after, stats.records_removed)
        return stats

    # -- lifecycle ------------------------------------------------------------------------------

    def _pin(self) -> None:
        with self._pin_lock:
            self._pins += 1

    def _unpin(self) -> None:
        with self._pin_lock:
            self._pins -= 1
            retired = self._retired if self._pins == 0 else []
            if retired:
                self._retired = []
        for segment, delete in retired:
            self._dispose(segment, delete)

    def _retire(self, segment: LogSegment | SegmentFiles, delete: bool) -> None:
        with self._pin_lock:
            if self._pins:
                self._retired.append((segment, delete))
                return
        self._dispose(segment, delete)

    def _dispose(self, segment: LogSegment | SegmentFiles, delete: bool) -> None:
        try:
            segment.delete() if delete else segment.close()
        except OSError:
            log.warning("%s: could not dispose of %r", self.name, segment, exc_info=True)

    def _check_open(self) -> None:
        if self.closed:
            raise StorageError(f"{self.name}: log is closed")

    async def wait_idle(self) -> None:
        await self._commit.idle()

    def checkpoint_recovery_point(self) -> int:
        """The recovery point to checkpoint, once what a restart would trust below it is durable: the
        index files of every segment but the active one (a recovery after a crash opens the segments
        before the one holding the checkpointed point from their indexes), sealed with their max
        timestamp (Kafka's onBecomeInactiveSegment does it on roll), and the directory."""
        if self.closed:
            return self.recovery_point
        try:
            for segment in self._segments[:-1]:
                segment.seal()
                segment.sync_indexes()
            if self._dir_dirty:
                self.fs.fsync_dir(self.directory)
                self._dir_dirty = False
        except OSError as exc:
            raise StorageError(f"{self.name}: fsync of index files failed: {exc}") from exc
        return self.recovery_point

    def close(self) -> None:
        """Flush, fsync and close every segment, index files included: after a clean close the next
        open may trust them (the log manager's clean-shutdown marker)."""
        if self.closed:
            return
        try:
            for segment in self._segments:
                segment.seal()
            self.flush()
            try:
                for segment in self._segments:
                    segment.sync_indexes()
            except OSError as exc:
                raise StorageError(f"{self.name}: fsync of index files failed: {exc}") from exc
        finally:
            self.closed = True
            self._commit.fail_all(StorageError(f"{self.name}: log closed"))
            for segment in self._segments:
                self._retire(segment, delete=False)

    def delete(self) -> None:
        """Close and remove every file of this log (topic deletion)."""
        self.closed = True
        self._commit.fail_all(StorageError(f"{self.name}: log deleted"))
        for segment in self._segments:
            self._retire(segment, delete=True)
        self._segments = []
