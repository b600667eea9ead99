"""The coordinator runtime: binds the pure GroupCoordinatorService to asyncio and storage.

Everything else in coordinator/ is deterministic and I/O-free; this module supplies what it is
injected with:

* `WallClock` — `now_ms()`; records carry wall-clock timestamps, like Kafka's (kcoord.coordinator.common,
  shared with the transaction coordinator's runtime, as are the append error map, `every` and LoadGate).
* `LoopTimer` — keyed, replaceable timers on `loop.call_at` (delays are relative, so loop time alone
  places them); pushing a deadline back is lazy (no cancel + re-arm per heartbeat).
* `OffsetsTopicWriter` (kcoord.coordinator.runtime.writer) — appends the coordinator's records as one v2
  batch per write to `__consumer_offsets-N` (a partition's writes of one loop tick in one append) and
  calls back only once they are fsynced: a callback with NONE means the records are durable.
* `MetricsEvents` — the coordinator's event sink (rebalances and their causes, group sizes) as broker
  metrics.
* `GroupRuntime` — owns them, loads every `__consumer_offsets` shard by replay once the server listens, a
  partition at a time (its groups answer as loading meanwhile, the loaded ones are served): from the
  partition's checkpoint and the log after it when the checkpoint is valid, else the whole log
  (kcoord.coordinator.runtime.checkpoints decides when checkpoints are written). It turns the service's
  callbacks into awaitables for the handlers, and shuts down cleanly. Tests (through the admin endpoint)
  may hold a partition's load (`hold_load` / `release_load`), load every partition again (`reload`) and
  fail the next offsets writes (`fail_offsets_writes`); nothing of that is read from the environment.

Cluster mode (issue #27): shards load and unload as this node gains and loses the leadership of their
partitions (kcoord.coordinator.runtime.elections), and writes are acknowledged once replicated.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from kcoord.coordinator import checkpoint_store
from kcoord.coordinator.common.runtime import LeaderReplication, LoadGate, every
from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.consumer.classic_members import PendingHeartbeat
from kcoord.coordinator.consumer.topics_image import NO_TOPICS, TopicsImage
from kcoord.coordinator.core import OFFSETS_TOPIC
from kcoord.coordinator.events import NO_EVENTS, CoordinatorEvents
from kcoord.coordinator.gc_pause import gc_paused
from kcoord.coordinator.results import LeaveGroupResult, OffsetCommit, OffsetFetchResult, RequestContext
from kcoord.coordinator.runtime import timer_control
from kcoord.coordinator.runtime.broker_views import BrokerTopics, MetricsEvents
from kcoord.coordinator.runtime.checkpoints import Checkpointer
from kcoord.coordinator.runtime.elections import ElectedShards
from kcoord.coordinator.runtime.loop_timer import LoopTimer, WallClock
from kcoord.coordinator.runtime.reply import Reply
from kcoord.coordinator.runtime.writer import OffsetsTopicWriter
from kcoord.coordinator.service import GroupCoordinatorService
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.protocol.errors import DecodeError, ErrorCode
from kcoord.storage import StorageError

# Durable records after a partition's checkpoint that make it write a new one. Bounds what a load
# after a crash replays (at most this per partition, ~0.3-1 µs a record) against how often a
# partition's checkpoint is rewritten (a rewrite decodes only the groups its tail touches).
CHECKPOINT_RECORDS = 10_000
CHECKPOINT_RECORDS_ENV = "KCOORD_OFFSETS_CHECKPOINT_RECORDS"  # tests and benches: another interval
LOAD_SLICE = 1000  # groups built between two turns of the loop while a partition loads

log = logging.getLogger("kcoord.coordinator.runtime")
__all__ = ["BrokerTopics", "GroupRuntime", "MetricsEvents", "Reply", "create"]


async def create(broker) -> GroupRuntime:
    """Build and start the runtime for a broker (the composition root calls this at start)."""
    props = broker.config.props
    clustered = broker.config.get("kcoord.etcd.connect") is not None
    runtime = GroupRuntime(broker.consumer_offsets_log, GroupConfig.from_properties(props),
                           events=MetricsEvents(broker.metrics), topics=BrokerTopics(broker),
                           compression=int(props.get("offsets.topic.compression.codec", 0)),
                           # a durable write moves that partition's high watermark: wake its long polls
                           on_durable=lambda p: broker.fetch_waiters.notify((OFFSETS_TOPIC, p)),
                           # cluster mode: the ReplicaManager, once the node has joined
                           replicas=(lambda: broker.visibility.replication) if clustered else None)
    await runtime.start()
    if clustered:  # shards follow the leadership of __consumer_offsets' partitions
        broker.coordinator_roles.register(OFFSETS_TOPIC, runtime)
    return runtime


class GroupRuntime(ElectedShards):
    """The asyncio face of the GroupCoordinatorService (`broker.group_coordinator`): it owns the clock, the timers
    and the writer, loads the shards after the server listens, and turns the service's callbacks into
    awaitables for the handlers."""

    def __init__(self, log_for: Callable[[int], Any], config: GroupConfig,
                 logger: logging.Logger | None = None, compression: int = 0,
                 on_durable: Callable[[int], None] | None = None,
                 events: CoordinatorEvents = NO_EVENTS, topics: TopicsImage = NO_TOPICS,
                 replicas: Callable[[], LeaderReplication | None] | None = None) -> None:
        self._log_for = log_for
        self._replicas = replicas  # cluster mode when given
        self._elections: set[asyncio.Task] = set()  # loads started by elections (cluster mode)
        self._topics = topics
        self._on_durable = on_durable
        self.config = config
        self.num_partitions = config.offsets_topic_num_partitions
        self._compression = compression
        self._logger = logger or logging.getLogger("kcoord.coordinator")
        self._events = events
        self.service: GroupCoordinatorService | None = None
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
        self.load_gate = LoadGate(lambda: asyncio.get_running_loop().create_future())  # tests' holds

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Create the service; every shard starts loading (its groups answer as loading meanwhile) in
        the background, a partition at a time, while the server serves the loaded ones."""
        loop = asyncio.get_running_loop()
        self._timer = LoopTimer(loop, self.clock)
        self._writer = OffsetsTopicWriter(self._log_for, loop, self._compression,
                                          on_durable=self._after_durable_write, replicas=self._replicas,
                                          replication_timeout_ms=self.config.offsets_commit_timeout_ms)
        self.service = GroupCoordinatorService(self.config, clock=self.clock, timer=self._timer,
                                               writer=self._writer, log=self._logger, events=self._events,
                                               owned_partitions=set(), topics=self._topics)
        if self.clustered:  # shards load when this node is elected for them
            self._active = True
            self.loaded_event.set()
            return
        for partition in range(self.num_partitions):
            self.service.begin_load(partition)
        self._active = True
        self._load_task = loop.create_task(self._load_all())

    @property
    def clustered(self) -> bool:
        return self._replicas is not None

    def _after_durable_write(self, partition: int) -> None:
        if not self.clustered:
            self.checkpoints.after_durable_write(partition)
        if self._on_durable is not None:
            self._on_durable(partition)

    async def _load_all(self) -> None:
        started = time.monotonic()
        count = from_checkpoint = 0
        await asyncio.sleep(0)  # the server opens its port first
        with gc_paused(freeze=True):  # for the whole load: between partitions, collections would scan it all
            for partition in range(self.num_partitions):
                await self.load_gate.wait(partition)
                try:
                    replayed, used = await self._load_partition(partition)
                except (StorageError, DecodeError):
                    # Kafka gives such a partition up; its groups answer NOT_COORDINATOR, never silence.
                    log.exception("cannot load %s-%d; not serving its groups", OFFSETS_TOPIC, partition)
                    self.service.unload_partition(partition)
                else:
                    self.service.complete_load(partition)
                    count += replayed
                    from_checkpoint += used
                    self._loaded.add(partition)
                await asyncio.sleep(0)  # serve requests between partitions
        self.loaded_event.set()
        self.checkpoints.start()
        log.info("loaded %d %s partitions (%d from checkpoints; %d records replayed) in %.1f ms",
                 self.num_partitions, OFFSETS_TOPIC, from_checkpoint, count, (time.monotonic() - started) * 1000)
        if self._sweep_task is None:  # (a reload keeps the one running)
            self._sweep_task = asyncio.get_running_loop().create_task(
                every(self.config.offsets_retention_check_interval_ms, lambda: self.checkpoints.sweep(sorted(self._loaded)),
                      sleep=asyncio.sleep, running=lambda: self._active, what="offsets checkpoint sweep", log=log),
                name="offsets checkpoint sweep")

    async def _load_partition(self, partition: int, shard: GroupCoordinatorShard | None = None,
                              leader_epoch: int | None = None) -> tuple[int, bool]:
        """Replay one partition into its loading shard without holding the loop for long: the log is read
        and folded a chunk at a time, the groups are built LOAD_SLICE at a time, requests served between.
        An elected load (cluster mode: `shard`, `leader_epoch`) reads the whole log, no checkpoint, and
        stops building once it went stale."""
        loaded: list = []
        keep_loaded = lambda _p, _records, state, keep: loaded.append((state, keep))  # noqa: E731
        if shard is None:
            steps = self.checkpoints.load_steps(partition, keep_loaded)
        else:
            steps = checkpoint_store.load_steps(self._log_for(partition), partition, self.clock.now_ms(),
                                                keep_loaded, use_checkpoint=False)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                # (records replayed, checkpoint used): Checkpointer.load_steps's, or from checkpoint_store's Loaded
                result = done.value if shard is None else (done.value.replayed, False)
                break
            await asyncio.sleep(0)
        (state, keep), = loaded
        if shard is None:
            shard = self.service.loading[partition]
        elif not self.service.is_loading(partition, leader_epoch or 0, shard):
            return result  # stale: nothing is built
        shard.load_consumer_groups(state)
        group_ids = sorted(state.groups())
        for start in range(0, len(group_ids), LOAD_SLICE):
            shard.load(state, keep, group_ids[start:start + LOAD_SLICE])
            await asyncio.sleep(0)
        if state.transactional:  # open transactions' offsets, of groups with nothing else in the log
            shard.load(state, keep, [])
        return result

    # ------------------------------------------------------------------ tests' controls (the admin endpoint)
    def hold_load(self, partitions) -> list[int]:
        """From now on a load of these partitions waits until they are released. Returns the held ones."""
        return self.load_gate.hold(partitions)

    def release_load(self, partitions=None) -> list[int]:
        """Let held loads go on (`partitions` None: all). Returns the partitions still held."""
        return self.load_gate.release(partitions)

    def reload(self) -> int:
        """Load every partition again, from its checkpoint and log, a partition at a time as at start (held
        ones wait): as if this node gave up every partition and was elected for them again. Their groups
        answer as loading meanwhile; parked requests are told NOT_COORDINATOR. Returns the partitions."""
        if self.service is None or not self._active:
            raise RuntimeError("the group coordinator is not running")
        if self.clustered:  # the partitions led here, resigned and elected again at their epochs
            led = dict(self.service.epochs)
            for partition, epoch in sorted(led.items()):
                self.service.on_resignation(partition, None)
                self.on_election(partition, epoch)
            return len(led)
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
        for partition in range(self.num_partitions):
            self.service.begin_load(partition)
        self._loaded.clear()
        self.loaded_event.clear()
        self._load_task = asyncio.get_running_loop().create_task(self._load_all())
        return self.num_partitions

    def fail_offsets_writes(self, count: int = 1) -> int:
        """The next `count` writes to __consumer_offsets fail (nothing of them is written or acknowledged).
        Returns how many will."""
        if self._writer is None:
            raise RuntimeError("the group coordinator is not running")
        return self._writer.fail_next(count)

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
        for task in list(self._elections):
            task.cancel()
        await asyncio.gather(*self._elections, return_exceptions=True)
        if self._writer is not None:
            await self._writer.drain()
        # Every durable record is covered, so the next start replays (almost) nothing.
        await self.checkpoints.close(sorted(self._loaded))
        self.service.shutdown()
        if self._timer is not None:
            self._timer.cancel_all()

    # ------------------------------------------------------------------ serving (the handlers' calls)
    @property
    def timer(self) -> LoopTimer | None:
        return self._timer

    @property
    def active(self) -> bool:
        """Whether this node coordinates groups now (FindCoordinator's question)."""
        return self._active and self.service is not None and self.service.active

    def partition_for(self, group_id: str) -> int:
        return self.service.partition_for(group_id)

    def join_group(self, context: RequestContext, request) -> Reply:
        reply = Reply()
        self.service.join_group(context, request, reply)
        return reply

    def sync_group(self, context: RequestContext, request) -> Reply:
        reply = Reply()
        self.service.sync_group(context, request, reply)
        return reply

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode | PendingHeartbeat:
        """A Heartbeat's answer: at once (no Reply: most requests are heartbeats), except a classic member's
        of a consumer group with a write of that group in flight, which waits for it (a PendingHeartbeat,
        as Kafka's runtime answers a write operation once the pending writes are committed)."""
        return self.service.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave_group(self, context: RequestContext, request) -> LeaveGroupResult | Reply:
        """At once for a classic group; a Reply (awaited) when classic members leave a consumer group."""
        reply = Reply()
        result = self.service.leave_group(context, request, reply)
        return reply if result is None else result

    def consumer_group_heartbeat(self, context: RequestContext, request, callback: Callable | None = None) -> Reply:
        """The heartbeat's result: to `callback` if given, else the Reply."""
        reply = Reply() if callback is None else callback
        self.service.consumer_group_heartbeat(context, request, reply)
        return reply

    def steady_consumer_heartbeat(self, group_id: str, member_id: str, member_epoch: int, client_id: str,
                                  client_host: str) -> int | None:
        """A steady ConsumerGroupHeartbeat answered at once (the frame fast path): the heartbeat interval to
        answer with, or None: take consumer_group_heartbeat. No Reply: most requests of a consumer group
        are these."""
        return self.service.steady_consumer_heartbeat(group_id, member_id, member_epoch, client_id, client_host)

    def share_group_heartbeat(self, context: RequestContext, request) -> Reply:
        """KIP-932's heartbeat: its result once durable (kcoord.coordinator.share)."""
        reply = Reply()
        self.service.share_group_heartbeat(context, request, reply)
        return reply

    def commit_offsets(self, request: OffsetCommit, callback: Callable | None = None) -> Reply:
        """The commit's per-partition errors once durable: to `callback` if given, else the Reply."""
        reply = Reply() if callback is None else callback
        self.service.commit_offsets(request, reply)
        return reply

    def txn_commit_offsets(self, request: OffsetCommit, producer_id: int, producer_epoch: int) -> Reply:
        reply = Reply()
        self.service.txn_commit_offsets(request, producer_id, producer_epoch, reply)
        return reply

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                             commit: bool) -> Reply:
        """A transaction marker written to `__consumer_offsets-<partition>` and replayed: awaits the error
        (TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch; runtime.scheduleTransactionCompletion)."""
        reply = Reply()
        self.service.complete_transaction(partition, producer_id, producer_epoch, coordinator_epoch, commit, reply)
        return reply

    def fetch_offsets(self, group_id: str, partitions, require_stable: bool, member_id: str | None = None,
                      member_epoch: int = -1) -> OffsetFetchResult:
        return self.service.fetch_offsets(group_id, partitions, require_stable, member_id, member_epoch)

    def describe_groups(self, group_ids, request_version: int) -> list:
        return self.service.describe_groups(group_ids, request_version)

    def consumer_group_describe(self, group_ids) -> list:
        return self.service.consumer_group_describe(group_ids)

    def list_groups(self, states_filter) -> tuple[ErrorCode, list]:
        return self.service.list_groups(states_filter)

    def delete_groups(self, group_ids) -> Reply:
        reply = Reply()
        self.service.delete_groups(group_ids, reply)
        return reply

    def delete_offsets(self, group_id: str, partitions) -> Reply:
        reply = Reply()
        self.service.delete_offsets(group_id, partitions, reply)
        return reply

    def handle_topics_deleted(self, topics) -> int:
        return self.service.handle_topics_deleted(topics)

    # ------------------------------------------------------------------ timer control (kcoord.coordinator.runtime.timer_control)
    def expire_member(self, group_id: str, member_id: str) -> bool:
        return timer_control.expire_member(self, group_id, member_id)

    def fire_group_timers(self, group_id: str) -> int:
        return timer_control.fire_group_timers(self, group_id)

    def run_offset_retention(self) -> int:
        return timer_control.run_offset_retention(self)
