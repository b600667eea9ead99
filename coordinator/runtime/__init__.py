"""The coordinator runtime: binds the pure GroupCoordinator to asyncio and storage.

Everything else in coordinator/ is deterministic and I/O-free; this module supplies what it is
injected with:

* `WallClock` — `now_ms()`; records carry wall-clock timestamps, like Kafka's.
* `LoopTimer` — keyed, replaceable timers on `loop.call_at` (delays are relative, so loop time alone
  places them); pushing a deadline back is lazy (no cancel + re-arm per heartbeat).
* `OffsetsTopicWriter` (coordinator.runtime.writer) — appends the coordinator's records as one v2
  batch per write to `__consumer_offsets-N` (a partition's writes of one loop tick in one append) and
  calls back only once they are fsynced: a callback with NONE means the records are durable.
* `CoordinatorEvents` — the coordinator's structured log events (rebalances and their causes, group
  sizes) as broker metrics.
* `GroupRuntime` — owns them, loads every `__consumer_offsets` partition by replay before serving it
  (requests answer COORDINATOR_LOAD_IN_PROGRESS meanwhile): from the partition's checkpoint and the log
  after it when the checkpoint is valid, else the whole log (coordinator.runtime.checkpoints decides when
  checkpoints are written). It turns the coordinator's callbacks into awaitables for the handlers, and
  shuts down cleanly.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from coordinator import GroupConfig, GroupCoordinator
from coordinator.gc_pause import gc_paused
from coordinator.runtime.checkpoints import Checkpointer
from coordinator.runtime.writer import FAULT_FILE_ENV as FAULT_FILE_ENV  # tests and the broker set it
from coordinator.runtime.writer import OFFSETS_TOPIC, OffsetsTopicWriter
from protocol.errors import DecodeError, ErrorCode
from storage import StorageError

# Durable records after a partition's checkpoint that make it write a new one. Bounds what a load
# after a crash replays (at most this per partition, ~0.3-1 µs a record) against how often a
# partition's checkpoint is rewritten (a rewrite decodes only the groups its tail touches).
CHECKPOINT_RECORDS = 10_000
CHECKPOINT_RECORDS_ENV = "KCOORD_OFFSETS_CHECKPOINT_RECORDS"  # tests and benches: another interval

log = logging.getLogger("kcoord.coordinator.runtime")


class WallClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class _Pending:
    __slots__ = ("when", "callback", "handle", "armed_at")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when            # loop time the timer is due
        self.callback = callback
        self.handle: asyncio.TimerHandle | None = None
        self.armed_at = when        # loop time `handle` fires (<= when)


class LoopTimer:
    """Keyed, replaceable timers. Scheduling a key again replaces its previous timer.

    Replacing a timer with a later one (every heartbeat pushes its member's expiry forward) only
    records the new deadline and callback: the armed loop timer, when it fires early, re-arms itself
    for the deadline. So a heartbeat costs no cancel + call_at, and what fires, and when, is exactly
    what the last `schedule` asked for. An earlier deadline re-arms at once.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, clock) -> None:
        self._loop = loop
        self._clock = clock  # kept for the interface; delays are relative, so loop time alone places them
        self._pending: dict[Any, _Pending] = {}

    def schedule(self, key, delay_ms: int, callback: Callable[[], None]) -> None:
        when = self._loop.time() + (delay_ms / 1000.0 if delay_ms > 0 else 0.0)
        entry = self._pending.get(key)
        if entry is not None:
            if entry.armed_at <= when:
                entry.when = when
                entry.callback = callback
                return
            entry.handle.cancel()
        entry = _Pending(when, callback)
        entry.handle = self._loop.call_at(when, self._fire, key, entry)
        self._pending[key] = entry

    def cancel(self, key) -> bool:
        entry = self._pending.pop(key, None)
        if entry is None:
            return False
        entry.handle.cancel()
        return True

    def is_scheduled(self, key) -> bool:
        return key in self._pending

    def cancel_all(self) -> None:
        for entry in self._pending.values():
            entry.handle.cancel()
        self._pending.clear()

    def _fire(self, key, entry: _Pending) -> None:
        if self._pending.get(key) is not entry:
            return  # replaced or cancelled meanwhile (its handle was cancelled too; belt and braces)
        if entry.when > entry.armed_at:  # pushed back since it was armed
            entry.armed_at = entry.when
            entry.handle = self._loop.call_at(entry.when, self._fire, key, entry)
            return
        del self._pending[key]
        try:
            entry.callback()
        except Exception:  # a timer must never take the loop down
            log.exception("coordinator timer %r failed", key)


async def create(broker) -> GroupRuntime:
    """Build and start the runtime for a broker (the composition root calls this at start)."""
    props = broker.config.props
    runtime = GroupRuntime(broker.consumer_offsets_log, GroupConfig.from_properties(props),
                           logger=coordinator_logger(broker.metrics),
                           compression=int(props.get("offsets.topic.compression.codec", 0)),
                           # a durable write moves that partition's high watermark: wake its long polls
                           on_durable=lambda p: broker.fetch_waiters.notify((OFFSETS_TOPIC, p)))
    await runtime.start()
    return runtime


class CoordinatorEvents(logging.Handler):
    """The coordinator's log records carry structured events (extra={"event": ..., "group_id": ...});
    this turns them into broker metrics and hands every record on to the "kcoord.coordinator"
    logger, so metrics do not depend on the log level and the log output is unchanged."""

    def __init__(self, metrics, target: logging.Logger) -> None:
        super().__init__(logging.DEBUG)
        self.metrics = metrics
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        group = getattr(record, "group_id", "")
        if self.metrics is not None and event is not None:
            if event == "prepare_rebalance":
                self.metrics.rebalance(group, getattr(record, "cause", None) or "other")
            elif event == "join_complete":
                self.metrics.group_members(group, getattr(record, "members", 0))
            elif event in ("group_empty", "group_deleted", "group_expired"):
                self.metrics.group_members(group, 0)
        if self.target.isEnabledFor(record.levelno):
            self.target.handle(record)


def coordinator_logger(metrics) -> logging.Logger:
    """A private logger for the coordinator that sees every event record (see CoordinatorEvents):
    INFO, where the events are, or lower if the real logger is more verbose."""
    target = logging.getLogger("kcoord.coordinator")
    # Not registered with logging: no parent, and a level of its own.
    logger = logging.Logger(target.name, min(target.getEffectiveLevel(), logging.INFO))
    logger.propagate = False
    logger.addHandler(CoordinatorEvents(metrics, target))
    return logger


class GroupRuntime:
    """The asyncio face of the GroupCoordinator (`broker.groups`)."""

    def __init__(self, log_for: Callable[[int], Any], config: GroupConfig,
                 logger: logging.Logger | None = None, compression: int = 0,
                 on_durable: Callable[[int], None] | None = None) -> None:
        self._log_for = log_for
        self._on_durable = on_durable
        self.config = config
        self.num_partitions = config.offsets_topic_num_partitions
        self._compression = compression
        self._logger = logger or logging.getLogger("kcoord.coordinator")
        self.coordinator: GroupCoordinator | None = None
        self.clock = WallClock()
        self._timer: LoopTimer | None = None
        self._writer: OffsetsTopicWriter | None = None
        self._loaded: set[int] = set()
        self._load_task: asyncio.Task | None = None
        self._sweep_task: asyncio.Task | None = None
        self._active = False
        self.loaded_event = asyncio.Event()
        interval = int(os.environ.get(CHECKPOINT_RECORDS_ENV) or CHECKPOINT_RECORDS)
        self.checkpoints = Checkpointer(log_for, self.clock, interval, self._logger)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Create the coordinator and start loading every partition in the background."""
        loop = asyncio.get_running_loop()
        self._timer = LoopTimer(loop, self.clock)
        self._writer = OffsetsTopicWriter(self._log_for, loop, self._compression,
                                          on_durable=self._after_durable_write)
        self.coordinator = GroupCoordinator(self.config, clock=self.clock, timer=self._timer,
                                            writer=self._writer, log=self._logger)
        for partition in range(self.num_partitions):
            self.coordinator.begin_load(partition)  # its groups answer LOAD_IN_PROGRESS until replayed
        self._active = True
        self._load_task = loop.create_task(self._load_all())

    def _after_durable_write(self, partition: int) -> None:
        self.checkpoints.after_durable_write(partition)
        if self._on_durable is not None:
            self._on_durable(partition)

    async def _load_all(self) -> None:
        started = time.monotonic()
        count = from_checkpoint = 0
        with gc_paused(freeze=True):  # for the whole load: between partitions, collections would scan it all
            for partition in range(self.num_partitions):
                try:
                    replayed, used = self.checkpoints.load(partition, self.coordinator.load_partition)
                except (StorageError, DecodeError):
                    # Kafka gives such a partition up; its groups answer NOT_COORDINATOR, never silence.
                    log.exception("cannot load %s-%d; not serving its groups", OFFSETS_TOPIC, partition)
                    self.coordinator.unload_partition(partition)
                else:
                    count += replayed
                    from_checkpoint += used
                    self._loaded.add(partition)
                await asyncio.sleep(0)  # let requests in meanwhile; they answer LOAD_IN_PROGRESS
        self.loaded_event.set()
        self.checkpoints.start()
        log.info("loaded %d %s partitions (%d from checkpoints; %d records replayed) in %.1f ms",
                 self.num_partitions, OFFSETS_TOPIC, from_checkpoint, count, (time.monotonic() - started) * 1000)
        self._sweep_task = asyncio.get_running_loop().create_task(self._sweep(), name="offsets checkpoint sweep")

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.config.offsets_retention_check_interval_ms / 1000)
            self.checkpoints.sweep(sorted(self._loaded))

    async def close(self) -> None:
        """Stop serving: let in-flight writes finish (their callbacks answer their requests), then
        give up every partition as Kafka does on shutdown (parked joins/syncs: NOT_COORDINATOR)."""
        if not self._active:
            return
        self._active = False
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
            await asyncio.gather(self._load_task, return_exceptions=True)
        if self._sweep_task is not None:
            self._sweep_task.cancel()
        if self._writer is not None:
            await self._writer.drain()
        # Every durable record is covered, so the next start replays (almost) nothing.
        await self.checkpoints.close(sorted(self._loaded))
        for partition in range(self.num_partitions):
            self.coordinator.unload_partition(partition)
        if self._timer is not None:
            self._timer.cancel_all()

    # ------------------------------------------------------------------ serving
    def partition_for(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    def group_error(self, group_id: str) -> ErrorCode:
        """NONE when this node serves `group_id` right now, else the error Kafka answers."""
        if not self._active or self.coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.coordinator.is_group_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def all_loaded_error(self) -> ErrorCode:
        """For requests about every group (ListGroups)."""
        if not self._active or self.coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.coordinator.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        """A Heartbeat's answer, at once (no Reply: heartbeats never wait, and they are most requests)."""
        error = self.group_error(group_id)
        if error:
            return error
        return self.coordinator.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def call(self, method: str, *args, **kwargs) -> Reply:
        """Invoke a callback-style coordinator entry point; the Reply is awaitable for its callback's
        argument. Many entry points (Heartbeat, most of the time) call back before returning, so the
        reply is already `done()` and a handler can take `result()` without awaiting."""
        reply = Reply()
        getattr(self.coordinator, method)(*args, callback=reply, **kwargs)
        return reply

    # ------------------------------------------------------------------ timer control (tests, admin endpoint)
    # What the admin endpoint, `kcoord groups expire-member / fire-timers / run-retention` and the pytest
    # fixture call (docs/CONTRACTS.md): make time-dependent group behaviour happen now.

    def expire_member(self, group_id: str, member_id: str) -> bool:
        """Expire `member_id`'s session now, as if it had stopped heartbeating: it leaves the group and
        the rebalance that follows has cause session_timeout. False if there is no such member."""
        from coordinator.rebalance import heartbeat_key

        gc = self.coordinator
        group = gc.get_group(group_id) if self.group_error(group_id) == ErrorCode.NONE else None
        if group is None:
            return False
        self._timer.cancel(heartbeat_key(group_id, member_id))
        member = group.members.get(member_id)
        if member is None:
            if not group.is_pending_member(member_id):
                return False
            gc.remove_pending_member_and_update_group(group, member_id)
            return True
        self._logger.info("Member %s in group %s has failed, removing it from the group (session expired on "
                          "request)", member_id, group_id,
                          extra={"group_id": group_id, "event": "member_failed", "member_id": member_id,
                                 "cause": "session_timeout"})
        gc.remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration",
                                          "session_timeout")
        return True

    def fire_group_timers(self, group_id: str) -> int:
        """Fire `group_id`'s pending join-phase timer (initial rebalance delay or rebalance timeout, again
        while an InitialDelayedJoin re-arms itself) and its pending-sync timer, if pending when called.
        Member sessions are left alone (expire_member). Returns how many timers fired."""
        from coordinator.purgatory import join_timer_key
        from coordinator.rebalance import sync_key

        pending = self._timer._pending
        sync_entry = pending.get(sync_key(group_id))
        fired = 0
        for _ in range(64):  # an InitialDelayedJoin re-arms at most a few times; bounded all the same
            if not self._fire_now(join_timer_key(group_id)):
                break
            fired += 1
        if sync_entry is not None and pending.get(sync_key(group_id)) is sync_entry:
            fired += self._fire_now(sync_key(group_id))
        return fired

    def _fire_now(self, key) -> bool:
        entry = self._timer._pending.pop(key, None)
        if entry is None:
            return False
        entry.handle.cancel()
        entry.callback()
        return True

    def run_offset_retention(self) -> int:
        """Run offset retention (KIP-211) now, as its periodic check does; returns records written
        (offset tombstones, and group tombstones for Empty groups left without offsets)."""
        if self.all_loaded_error() != ErrorCode.NONE:
            return 0
        return self.coordinator.cleanup_group_metadata()


class Reply:
    """The callback handed to the coordinator, and an awaitable of what it is called with (the first
    call counts). No future is made unless someone awaits before the answer is there."""

    __slots__ = ("_done", "_result", "_future")

    def __init__(self) -> None:
        self._done = False
        self._result = None
        self._future: asyncio.Future | None = None

    def __call__(self, result) -> None:
        if self._done:
            return
        self._done = True
        self._result = result
        if self._future is not None and not self._future.done():
            self._future.set_result(result)

    def done(self) -> bool:
        return self._done

    def result(self):
        if not self._done:
            raise asyncio.InvalidStateError("the coordinator has not answered yet")
        return self._result

    def __await__(self):
        if not self._done:
            if self._future is None:
                self._future = asyncio.get_running_loop().create_future()
            return (yield from self._future.__await__())
        return self._result
