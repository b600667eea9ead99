"""LogManager: every partition log under one log directory.

Opening loads each `<topic>-<partition>` directory as Kafka's LogManager.loadLogs does
(core/.../log/LogManager.scala): if the clean-shutdown marker `.kafka_cleanshutdown` is there, it
is deleted first (KAFKA-10471: a crash while loading then counts as unclean) and no segment is
recovered; otherwise each log recovers the segments from its checkpointed recovery point on
(`recovery-point-offset-checkpoint`, Kafka's offset checkpoint format). See kcoord.storage.log_loader.
The checkpoint is rewritten once the logs are open, by maintenance when a point moved, after a
truncation or topic deletion and at close; a close that flushed and closed every log without an
error then writes the marker (Kafka's LogManager.shutdown, CleanShutdownFileHandler.write).

A replicated log dir also holds `replication-offset-checkpoint`: the high watermark of each of its
partitions, which the replication layer owns and hands over (checkpoint_high_watermarks, periodically
and at a clean shutdown, as Kafka's ReplicaManager.checkpointHighWatermarks every
replica.high.watermark.checkpoint.interval.ms); a node reads it when it starts (read_high_watermarks).
A single node never writes it.

Topic deletion renames the directory to `<name>.<uuid>-delete` first (as Kafka does), so a crash
mid-delete never leaves a half-deleted partition that would be recovered as live; leftovers are
removed on the next start.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from kcoord.storage.checkpoint import read_checkpoint, write_checkpoint
from kcoord.storage.config import LogConfig
from kcoord.storage.errors import StorageError
from kcoord.storage.fs import FS, replace_file
from kcoord.storage.fsync_pool import FsyncPool
from kcoord.storage.log import PartitionLog, wall_clock_ms

log = logging.getLogger("kcoord.storage")

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_DELETE_SUFFIX = "-delete"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# CleanShutdownFileHandler's content; one node without a controller has no broker epoch (Kafka's -1).
CLEAN_SHUTDOWN_CONTENT = b'{"version":0,"brokerEpoch":-1}'
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`__consumer_offsets-12` -> ("__consumer_offsets", 12); None for anything else."""
    if name.endswith(_DELETE_SUFFIX):
        return None
    match = _PARTITION_DIR.match(name)
    if match is None:
        return None
    return match["topic"], int(match["partition"])


class LogManager:
    def __init__(self, log_dir: str, default_config: LogConfig | None = None, fs: FS | None = None,
                 clock: Callable[[], int] = wall_clock_ms,
                 topic_configs: dict[str, LogConfig] | None = None) -> None:
        self.log_dir = log_dir
        self.default_config = default_config or LogConfig()
        # Per-topic overrides (e.g. __consumer_offsets: compact), applied from the moment a log is
        # opened so that no maintenance pass ever sees it under the default policy.
        self.topic_configs = dict(topic_configs or {})
        self.fs = fs or FS()
        self.clock = clock
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._maintenance: asyncio.Task | None = None
        self.had_clean_shutdown = False
        self._checkpointed: dict[tuple[str, int], int] = {}  # the recovery points last written
        # The replication layer's high watermarks, checkpointed at close (None: a single node, no file).
        self.high_watermarks: Callable[[], dict[tuple[str, int], int]] | None = None
        self._hw_checkpoints: asyncio.Task | None = None
        # Storage's own threads: fsyncs never queue behind other blocking work, and one cleaner
        # thread (Kafka's log.cleaner.threads default) keeps compaction from hogging both cores.
        self.fsync_executor = FsyncPool(max_workers=4, thread_name_prefix="kcoord-fsync")
        self.cleaner_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcoord-cleaner")
        self.fs.makedirs(log_dir)
        self._load()

    def _load(self) -> None:
        marker = os.path.join(self.log_dir, CLEAN_SHUTDOWN_FILE)
        self.had_clean_shutdown = self.fs.exists(marker)
        if self.had_clean_shutdown:
            self.fs.remove(marker)
            self.fs.fsync_dir(self.log_dir)  # gone for good before any append can follow
        recovery_points = read_checkpoint(self.fs, os.path.join(self.log_dir, RECOVERY_POINT_CHECKPOINT))
        for name in sorted(self.fs.listdir(self.log_dir)):
            path = os.path.join(self.log_dir, name)
            if not self.fs.isdir(path):
                continue
            if name.endswith(_DELETE_SUFFIX):
                log.info("removing %s left by an unfinished topic deletion", name)
                shutil.rmtree(path, ignore_errors=True)
                continue
            parsed = parse_partition_dir(name)
            if parsed is None:
                continue
            self._logs[parsed] = self._watch(PartitionLog(
                path, parsed[0], parsed[1], self.config_for(parsed[0]), self.fs, self.clock, self.fsync_executor,
                had_clean_shutdown=self.had_clean_shutdown, recovery_point_checkpoint=recovery_points.get(parsed, 0),
                defer_open_sync=True))
        pending = [lg for lg in self._logs.values() if lg.open_sync_pending]
        if pending:
            # fsyncs of what recovery kept, several at once (a crash leaves one per log to do)
            with ThreadPoolExecutor(max_workers=4, thread_name_prefix="kcoord-open") as pool:
                list(pool.map(PartitionLog.finish_open, pending))
        trusted = sum(lg.loaded_trusted for lg in self._logs.values())
        recovered = sum(lg.loaded_recovered for lg in self._logs.values())
        log.info("loaded %d logs from %s (%s): %d segments opened from their indexes, %d recovered",
                 len(self._logs), self.log_dir, "clean shutdown" if self.had_clean_shutdown else "no clean shutdown",
                 trusted, recovered)
        # Where compaction got to, so a restart does not clean every compacted log again.
        for key, offset in read_checkpoint(self.fs, os.path.join(self.log_dir, CLEANER_CHECKPOINT)).items():
            partition_log = self._logs.get(key)
            if partition_log is not None:
                partition_log.first_dirty_offset = min(max(offset, partition_log.log_start_offset),
                                                       partition_log.log_end_offset)
        # Log start offsets that DeleteRecords moved inside a segment (Kafka's log-start-offset-checkpoint).
        for key, offset in read_checkpoint(self.fs, os.path.join(self.log_dir, LOG_START_CHECKPOINT)).items():
            partition_log = self._logs.get(key)
            if partition_log is not None:
                partition_log.maybe_increment_log_start_offset(min(offset, partition_log.log_end_offset))
        # What was just recovered is durable now; entries of logs that are gone must not outlive them.
        self.write_recovery_checkpoint()

    def _watch(self, partition_log: PartitionLog) -> PartitionLog:
        partition_log.on_truncated = lambda _: self.write_recovery_checkpoint()
        return partition_log

    # -- configuration --------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def set_topic_config(self, topic: str, config: LogConfig) -> None:
        """Use `config` for every partition of `topic`, open now or created later."""
        self.topic_configs[topic] = config
        for (name, _), partition_log in self._logs.items():
            if name == topic:
                partition_log.config = config

    # -- lookup ---------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The partition's log, created if missing. A given config replaces that log's config;
        without one, the topic's config (see topic_configs / set_topic_config) or the default."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            if config is not None:
                existing.config = config
            return existing
        if not topic or "/" in topic or topic in (".", ".."):
            raise StorageError(f"invalid topic name {topic!r}")
        path = os.path.join(self.log_dir, partition_dir_name(topic, partition))
        try:
            created = self._watch(PartitionLog(path, topic, partition, config or self.config_for(topic), self.fs,
                                               self.clock, self.fsync_executor))
            self.fs.fsync_dir(self.log_dir)
        except OSError as exc:
            raise StorageError(f"cannot create log {topic}-{partition}: {exc}") from exc
        self._logs[(topic, partition)] = created
        return created

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    def logs(self) -> list[PartitionLog]:
        return [self._logs[key] for key in sorted(self._logs)]

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self._logs):
            out.setdefault(topic, []).append(partition)
        return out

    def delete_topic(self, topic: str) -> int:
        """Delete every partition of `topic`; returns how many there were."""
        keys = [key for key in self._logs if key[0] == topic]
        for key in keys:
            partition_log = self._logs.pop(key)
            partition_log.delete()
            doomed = os.path.join(self.log_dir, f"{partition_dir_name(*key)}.{uuid.uuid4().hex}{_DELETE_SUFFIX}")
            try:
                self.fs.rename(partition_log.directory, doomed)
            except OSError as exc:
                raise StorageError(f"cannot delete {partition_log.name}: {exc}") from exc
            shutil.rmtree(doomed, ignore_errors=True)
        if keys:
            self.fs.fsync_dir(self.log_dir)
            self.write_recovery_checkpoint()  # a log created again under this name starts from 0
            if self.fs.exists(os.path.join(self.log_dir, LOG_START_CHECKPOINT)):
                self.write_log_start_checkpoint()  # a topic made again under this name starts at 0
            if self.fs.exists(os.path.join(self.log_dir, HIGH_WATERMARK_CHECKPOINT)):
                self.checkpoint_high_watermarks(self.read_high_watermarks())  # nor with its old HWM
        return len(keys)

    # -- background maintenance: retention and compaction --------------------------------------

    async def maintain_once(self, now_ms: int | None = None) -> None:
        """One pass: fsync logs that do not fsync per append, retention for delete-policy logs,
        compaction (in a worker thread) for compact-policy logs whose dirty ratio is reached."""
        cleaned = False
        for partition_log in self.logs():
            if partition_log.closed:
                continue
            try:
                if not partition_log.config.flush_on_append and partition_log.recovery_point < partition_log.log_end_offset:
                    await partition_log.sync()  # the periodic flush of logs that do not fsync per append
                partition_log.delete_old_segments(now_ms)
                if partition_log.needs_compaction():
                    await partition_log.compact_async(now_ms, executor=self.cleaner_executor)
                    cleaned = True
            except StorageError:
                log.exception("maintenance of %s failed", partition_log.name)
        if cleaned:
            self.write_cleaner_checkpoint()
        if any(self._checkpointed.get(key) != lg.recovery_point for key, lg in self._logs.items()):
            self.write_recovery_checkpoint()

    def write_cleaner_checkpoint(self) -> None:
        """Persist each compacted log's first dirty offset (Kafka's cleaner-offset-checkpoint)."""
        offsets = {key: lg.first_dirty_offset for key, lg in self._logs.items()
                   if lg.first_dirty_offset > lg.log_start_offset and not lg.closed}
        try:
            write_checkpoint(self.fs, os.path.join(self.log_dir, CLEANER_CHECKPOINT), offsets)
        except OSError as exc:
            log.warning("could not write %s: %s", CLEANER_CHECKPOINT, exc)

    def write_recovery_checkpoint(self) -> None:
        """Persist each log's recovery point (Kafka's recovery-point-offset-checkpoint), after making
        durable what a recovery would trust below it (see PartitionLog.checkpoint_recovery_point)."""
        offsets = {}
        path = os.path.join(self.log_dir, RECOVERY_POINT_CHECKPOINT)
        try:
            for key, partition_log in self._logs.items():
                offsets[key] = partition_log.checkpoint_recovery_point()
            write_checkpoint(self.fs, path, offsets)
        except (OSError, StorageError) as exc:
            # The previous points may be above a truncation since: without any, a crash recovers all.
            log.warning("could not write %s (removing it): %s", RECOVERY_POINT_CHECKPOINT, exc)
            self._checkpointed = {}
            try:
                self.fs.remove(path)
                self.fs.fsync_dir(self.log_dir)
            except OSError:
                log.exception("could not remove %s", path)
            return
        self._checkpointed = offsets

    def checkpoint_high_watermarks(self, high_watermarks: dict[tuple[str, int], int]) -> None:
        """Replace `replication-offset-checkpoint` with the high watermarks of this dir's partitions (those
        of partitions without a log here are left out), in Kafka's OffsetCheckpointFile format (version 0,
        count, "topic partition offset" lines), atomically: temporary file fsynced, renamed, directory
        fsynced (ReplicaManager.checkpointHighWatermarks). Raises StorageError."""
        offsets = {key: hw for key, hw in high_watermarks.items() if key in self._logs}
        try:
            write_checkpoint(self.fs, os.path.join(self.log_dir, HIGH_WATERMARK_CHECKPOINT), offsets)
        except OSError as exc:
            raise StorageError(f"could not write {HIGH_WATERMARK_CHECKPOINT}: {exc}") from exc

    def read_high_watermarks(self) -> dict[tuple[str, int], int]:
        """The checkpointed high watermarks, as written ({} without a file, or with a malformed one). A
        caller bounds each by its log (UnifiedLog.updateHighWatermark keeps it within [log start, log end])."""
        return read_checkpoint(self.fs, os.path.join(self.log_dir, HIGH_WATERMARK_CHECKPOINT))

    def start_high_watermark_checkpoints(self, source: Callable[[], dict[tuple[str, int], int]],
                                         interval_s: float = 5.0) -> asyncio.Task:
        """Checkpoint `source()` every interval (Kafka's replica.high.watermark.checkpoint.interval.ms,
        5 s) and once more at close."""
        self.high_watermarks = source

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_s)
                try:
                    self.checkpoint_high_watermarks(source())
                except Exception:  # a background loop must outlive one bad pass
                    log.exception("high watermark checkpoint failed")

        if self._hw_checkpoints is None:
            self._hw_checkpoints = asyncio.get_running_loop().create_task(loop(), name="high watermark checkpoints")
        return self._hw_checkpoints

    def _write_clean_shutdown_marker(self) -> None:
        try:
            replace_file(self.fs, os.path.join(self.log_dir, CLEAN_SHUTDOWN_FILE), CLEAN_SHUTDOWN_CONTENT)
        except OSError as exc:
            log.warning("could not write %s (the next start recovers): %s", CLEAN_SHUTDOWN_FILE, exc)

    def write_log_start_checkpoint(self) -> None:
        """Persist the log start offsets that lie above their log's first segment (moved by DeleteRecords),
        as Kafka's log-start-offset-checkpoint; fsynced before it returns. Raises StorageError."""
        offsets = {key: lg.log_start_offset for key, lg in self._logs.items()
                   if not lg.closed and lg.segments and lg.log_start_offset > lg.segments[0].base_offset}
        try:
            write_checkpoint(self.fs, os.path.join(self.log_dir, LOG_START_CHECKPOINT), offsets)
        except OSError as exc:
            raise StorageError(f"could not write {LOG_START_CHECKPOINT}: {exc}") from exc

    def start_maintenance(self, interval_s: float = 15.0) -> asyncio.Task:
        """Run maintain_once every interval (log.cleaner.backoff.ms is 15 s in Kafka)."""
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_s)
                try:
                    await self.maintain_once()
                except Exception:  # a background loop must outlive one bad pass
                    log.exception("storage maintenance pass failed")

        if self._maintenance is None:
            self._maintenance = asyncio.get_running_loop().create_task(loop(), name="storage maintenance")
        return self._maintenance

    async def close(self) -> None:
        """Stop maintenance, let running group commits finish, fsync and close every log."""
        for task in (self._maintenance, self._hw_checkpoints):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._maintenance = self._hw_checkpoints = None
        errors = []
        if self.high_watermarks is not None and self._logs:
            try:  # ReplicaManager.shutdown checkpoints the high watermarks before the logs close
                self.checkpoint_high_watermarks(self.high_watermarks())
            except StorageError as exc:
                log.warning("%s", exc)
        if self._logs:
            self.write_cleaner_checkpoint()
            with contextlib.suppress(StorageError):
                self.write_log_start_checkpoint()
        for partition_log in self.logs():
            await partition_log.wait_idle()
            try:
                partition_log.close()
            except StorageError as exc:
                errors.append(exc)
        self.write_recovery_checkpoint()
        if not errors and not any(lg.offline for lg in self._logs.values()):
            # Every log flushed and closed, index files included: the next start may skip recovery.
            self._write_clean_shutdown_marker()
        self._logs.clear()
        self.fsync_executor.shutdown(wait=False)
        self.cleaner_executor.shutdown(wait=False)
        if errors:
            raise StorageError(f"{len(errors)} logs failed to close cleanly: {errors[0]}") from errors[0]
