"""When the runtime writes `__consumer_offsets` checkpoints (the asyncio side of checkpoint_store).

A checkpoint is rebuilt from the log, never from the coordinator's live objects: the previous
checkpoint's state plus the durable records after it, folded by PartitionState.replay (the load's
replay code). So a checkpoint is by construction what a replay of the log would leave, whatever
the coordinator holds in memory (members joining, writes in flight). Only the durable prefix
(below the recovery point) is covered: a write whose fsync fails is cut from the log, and must not
live on in a checkpoint.

Written, one partition at a time (the file I/O in a worker thread):
* after a load that replayed `interval_records` or more, or a whole log without a checkpoint
  (that state is in hand: written as is), once every partition is loaded and served;
* once `interval_records` durable records accumulated after a partition's checkpoint;
* on each sweep (every offsets.retention.check.interval.ms) for partitions with a tail, or whose
  checkpoint reaches a quarter of delete.retention.ms (it would be refused at half);
* at clean shutdown, for every loaded partition with a tail.
A failed write is logged and costs only a longer replay next time.

A checkpoint's read and fold run on the event loop, beside the requests: it waits until the coordinator
has written nothing for QUIET_MS (a group forming or rebalancing writes without pause), and no longer
than MAX_DEFER_MS after it started waiting. Only when it runs moves; the work is the same.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator
from typing import Any

from kcoord.coordinator import checkpoint_store
from kcoord.coordinator.checkpoint import CheckpointError
from kcoord.coordinator.gc_pause import gc_paused
from kcoord.coordinator.partition_state import PartitionState

log = logging.getLogger("kcoord.coordinator.checkpoint")

QUIET_MS = 100
MAX_DEFER_MS = 5000


class Checkpointer:
    def __init__(self, log_for: Callable[[int], Any], clock, interval_records: int,
                 logger: logging.Logger | None = None) -> None:
        self._log_for = log_for
        self._clock = clock
        self.interval_records = interval_records
        self._logger = logger or log
        self.covered: dict[int, tuple[int, int]] = {}  # partition -> (offset, written_ms) on disk
        self._fresh: dict[int, tuple[PartitionState, int, int]] = {}  # states from loads, to write
        self._queue: dict[int, None] = {}  # partitions waiting, in order
        self._worker: asyncio.Task | None = None
        self._started = False  # requests only queue until the load is over: serving comes first
        self._last_write: float | None = None  # time.monotonic() of the coordinator's last durable write
        self._hurry: asyncio.Event | None = None  # set at close: stop waiting for a quiet moment
        self.quiet_ms, self.max_defer_ms = QUIET_MS, MAX_DEFER_MS

    # ------------------------------------------------------------------ loading
    def load(self, partition: int,
             load_partition: Callable[[int, list, PartitionState, bool], Any]) -> tuple[int, bool]:
        """Load one partition: checkpoint + tail, or the whole log. Returns (records replayed,
        whether a checkpoint was used)."""
        return checkpoint_store.finish(self.load_steps(partition, load_partition))

    def load_steps(self, partition: int, load_partition: Callable[[int, list, PartitionState, bool], Any]
                   ) -> Generator[None, None, tuple[int, bool]]:
        """`load`, yielding between the chunks of log it reads (checkpoint_store.load_steps)."""
        partition_log = self._log_for(partition)
        now = self._clock.now_ms()
        loaded = yield from checkpoint_store.load_steps(partition_log, partition, now, load_partition)
        if loaded.written_ms is not None:
            self.covered[partition] = (loaded.start, loaded.written_ms)
        if loaded.state is not None and loaded.end <= partition_log.recovery_point:
            self._fresh[partition] = (loaded.state, loaded.end, now)  # else rebuilt from the durable part
        if loaded.replayed >= self.interval_records or loaded.state is not None:
            self.request(partition)
        return loaded.replayed, loaded.written_ms is not None

    # ------------------------------------------------------------------ triggers
    def after_durable_write(self, partition: int) -> None:
        self._last_write = time.monotonic()
        partition_log = self._log_for(partition)
        offset = self.covered.get(partition, (partition_log.log_start_offset, 0))[0]
        if partition_log.recovery_point - offset >= self.interval_records:
            self.request(partition)

    def sweep(self, partitions) -> None:
        now = self._clock.now_ms()
        for partition in partitions:
            partition_log = self._log_for(partition)
            offset, written_ms = self.covered.get(partition, (partition_log.log_start_offset, now))
            old = now - written_ms >= partition_log.config.delete_retention_ms * checkpoint_store.MAX_AGE_FRACTION / 2
            if partition_log.recovery_point > offset or (old and partition in self.covered):
                self.request(partition)

    def start(self) -> None:
        """The load is over: write what it queued, and from now on as requested."""
        self._started = True
        if self._queue:
            self.request(next(iter(self._queue)))

    def request(self, partition: int) -> None:
        self._queue[partition] = None
        if self._started and (self._worker is None or self._worker.done()):
            self._worker = asyncio.get_running_loop().create_task(self._drain(), name="offsets checkpoints")

    async def _drain(self) -> None:
        while self._queue:
            await self._quiet()
            if not self._queue:
                return
            partition = next(iter(self._queue))
            del self._queue[partition]
            await self.write(partition)

    async def _quiet(self) -> None:
        """Until QUIET_MS passed without a durable write (at most MAX_DEFER_MS), or close() hurries."""
        if self._hurry is None:
            self._hurry = asyncio.Event()
        start = time.monotonic()
        while self._last_write is not None and not self._hurry.is_set():
            now = time.monotonic()
            wait = min(self._last_write + self.quiet_ms / 1000, start + self.max_defer_ms / 1000) - now
            if wait <= 0:
                return
            try:
                await asyncio.wait_for(self._hurry.wait(), wait)
            except TimeoutError:
                pass

    async def idle(self) -> None:
        """Wait until every requested checkpoint is written (or failed)."""
        while self._worker is not None and not self._worker.done():
            await asyncio.gather(self._worker, return_exceptions=True)

    async def close(self, partitions) -> None:
        """Clean shutdown: finish queued work, then checkpoint every partition with a tail."""
        self._queue.clear()
        if self._hurry is not None:
            self._hurry.set()
        await self.idle()
        with gc_paused():  # the process is about to exit: no point collecting
            for partition in partitions:
                partition_log = self._log_for(partition)
                offset = self.covered.get(partition, (partition_log.log_start_offset, 0))[0]
                if partition in self._fresh or partition_log.recovery_point > offset:
                    await self.write(partition)

    # ------------------------------------------------------------------ writing
    async def write(self, partition: int) -> None:
        """Write the partition's checkpoint now. Never raises: a checkpoint is an optimisation."""
        partition_log = self._log_for(partition)
        try:
            await self._write(partition, partition_log)
        except CheckpointError as exc:
            log.warning("%s: its checkpoint is unusable (%s); the next load replays the whole log",
                        partition_log.name, exc)
            checkpoint_store.remove(partition_log)
            self.covered.pop(partition, None)
        except Exception:
            log.exception("%s: writing its checkpoint failed; the next load replays more", partition_log.name)

    async def _write(self, partition: int, partition_log) -> None:
        fresh = self._fresh.pop(partition, None)
        read_ms = self._clock.now_ms()
        if fresh is None:
            state, offset = checkpoint_store.refreshed_state(partition_log, partition, read_ms, self._logger)
        else:  # a load's state, fully decoded and the groups' tables copied: bring it up to date
            state, end, read_ms = fresh
            with gc_paused():
                latest, offset = checkpoint_store.read_tail_latest(partition_log, end, partition_log.recovery_point)
                state.replay_latest(latest, self._logger)
                del latest  # freed before collections resume
        size = await asyncio.get_running_loop().run_in_executor(
            None, checkpoint_store.write, partition_log, partition, state, offset, read_ms)
        self.covered[partition] = (offset, read_ms)
        log.debug("%s: checkpoint at offset %d: %d groups, %d bytes", partition_log.name, offset,
                  len(state.groups()), size)
