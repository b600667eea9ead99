"""A node's replicas: role changes in, the data plane of replication out (cluster mode only).

Kafka's ReplicaManager (core/src/main/scala/kafka/server/ReplicaManager.scala) reduced to what a kcoord
node needs, one asyncio owner and no locks:

- `apply(changes, image)` is ReplicaManager.applyDelta: BecomeLeader -> the log records the new epoch
  (storage's become_leader, Kafka's maybeAssignEpochStartOffset) and PartitionReplication.make_leader,
  the partition leaves its fetcher; BecomeFollower -> make_follower and the partition is (re)assigned to
  the fetcher of its leader (kcoord.cluster.fetcher), which truncates by DivergingEpoch before it appends;
  StopReplica -> stop and leave the fetchers. `drop_all_roles` is the node losing its lease.
- The leader side of a follower's Fetch (fetchMessages with a replica id, Partition.fetchRecords):
  `serve_replica_fetch` updates the follower's state, proposes ISR expansions, reads to the log end and
  long-polls until the leader appends (DelayedFetch for followers).
- Produce: `produce_error` (NOT_LEADER_OR_FOLLOWER; acks=all -> NOT_ENOUGH_REPLICAS below min ISR, from
  appendRecordsToLeader), `on_leader_append`, and `wait_acks_all` (DelayedProduce: completes when the
  high watermark covers the write; REQUEST_TIMED_OUT after the produce's timeout).
- Consumers: `consumer_fetch_bounds` checks the current leader epoch and bounds the read by the high
  watermark -- and by the leader's fsynced end, so a consumer never sees what a crash of the leader could
  take back (the single-node promise, kept by every replica).
- The ISR: `isr-expiration` every replica.lag.time.max.ms / 2 (ReplicaManager.maybeShrinkIsr), and every
  change (shrink or a fetch's expansion) written by the leader with compare-and-set
  (kcoord.cluster.isr.write_isr_change, AlterPartitionManager's role), one in flight per partition.

The rules themselves live in PartitionReplication (kcoord.cluster.replica_state); this module owns the
tasks, the futures and the logs around it.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kcoord.cluster import keys
from kcoord.cluster.fetcher import LeaderEndpoint, ReplicaFetcher, TcpLeaderEndpoint
from kcoord.cluster.isr import write_isr_change
from kcoord.cluster.leader_epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from kcoord.cluster.metadata_image import (
    BecomeFollower,
    BecomeLeader,
    MetadataImage,
    RoleChange,
    StopReplica,
    TopicPartition,
)
from kcoord.cluster.node_connection import node_address
from kcoord.cluster.partition_change import NO_BROKER_EPOCH, IsrChangeRequest
from kcoord.cluster.partition_state import NO_LEADER, PartitionRegistration
from kcoord.cluster.replica_state import NO_EPOCH, PartitionReplication, PendingAck
from kcoord.metadata.store import MetadataStore
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.storage import StorageError
from kcoord.storage.log import PartitionLog
from kcoord.storage.manager import LogManager

log = logging.getLogger("kcoord.cluster.replication")

ISR_RETRY_S = 0.05  # AlterPartitionManager's retry backoff for a change that may be sent again


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    """The broker settings replication reads, with Kafka's defaults."""

    replica_lag_time_max_ms: int = 30_000
    min_insync_replicas: int = 1
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576  # per partition
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1_000

    @classmethod
    def from_mapping(cls, props: Mapping[str, Any]) -> ReplicationConfig:
        """From Kafka property names (`replica.lag.time.max.ms`, ...); absent ones keep their default."""
        values = {}
        for name in cls.__dataclass_fields__:
            key = name.replace("_", ".")
            if key in props and props[key] is not None:
                values[name] = int(props[key])
        return cls(**values)


class _Waiters:
    """Follower long polls waiting for a leader's log to grow (DelayedFetch keyed by partition)."""

    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[None]]] = defaultdict(set)

    def notify(self, tp: TopicPartition) -> None:
        for future in self._waiting.pop(tp, ()):
            if not future.done():
                future.set_result(None)

    def wake_all(self) -> None:
        for tp in list(self._waiting):
            self.notify(tp)

    async def wait(self, tps: Iterable[TopicPartition], timeout_s: float) -> None:
        if timeout_s <= 0:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        tps = list(tps)
        for tp in tps:
            self._waiting[tp].add(future)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, timeout_s)
        finally:
            for tp in tps:
                waiting = self._waiting.get(tp)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._waiting[tp]


EndpointFactory = Callable[[int, Callable[[], MetadataImage]], LeaderEndpoint]


def tcp_endpoint(leader_id: int, images: Callable[[], MetadataImage], local_host: str | None = None) -> LeaderEndpoint:
    """The leader's first advertised listener (Kafka: inter.broker.listener.name's endpoint), looked up in
    the current image at each connect (a restarted leader may listen elsewhere). `local_host`: this node's
    listener host (see TcpLeaderEndpoint)."""
    return TcpLeaderEndpoint(lambda: node_address(images(), leader_id), local_host=local_host)


class ReplicaManager:
    """The replicas this node holds (see the module docstring). Not thread-safe: the node's loop owns it.

    `now_ms()` is the clock (wall time on a node, a manual clock in tests); `image_provider()` the node's
    current MetadataImage. `endpoint_factory(leader_id, image)` opens the connection a fetcher uses
    (TCP by default; tests pass an in-process one). `on_high_watermark(tp)` is told when a leader's high
    watermark moves, so consumer long polls wake (the broker's fetch waiters)."""

    def __init__(
        self,
        node_id: int,
        logs: LogManager,
        store: MetadataStore,
        config: ReplicationConfig,
        now_ms: Callable[[], int],
        image_provider: Callable[[], MetadataImage],
        *,
        endpoint_factory: EndpointFactory = tcp_endpoint,
        on_high_watermark: Callable[[tuple[str, int]], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.logs = logs
        self.store = store
        self.config = config
        self.now_ms = now_ms
        self._image = image_provider
        self._endpoint_factory = endpoint_factory
        self._on_high_watermark = on_high_watermark
        self._partitions: dict[TopicPartition, PartitionReplication] = {}
        self._revisions: dict[TopicPartition, int] = {}  # the partition key's mod revision we lead at
        self._acks: dict[PendingAck, asyncio.Future[ErrorCode]] = {}
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._followed: dict[TopicPartition, int] = {}  # partition -> the leader whose fetcher has it
        self._appends = _Waiters()
        self._isr_writes: dict[TopicPartition, asyncio.Task[None]] = {}
        self._isr_loop: asyncio.Task[None] | None = None
        self._closed = False
        # replication-offset-checkpoint: where each replica's high watermark starts (Kafka's
        # ReplicaManager reads it when it creates a Partition), written back by storage every 5 s and at close
        self._checkpointed_hws = logs.read_high_watermarks()

    # -- role changes (ReplicaManager.applyDelta) ------------------------------------------------------

    def apply(self, changes: Iterable[RoleChange], image: MetadataImage) -> None:
        """Act on the role changes of one metadata update, in order. Never blocks: fetchers and ISR writes
        run as tasks of their own."""
        if self._closed:
            return
        self._ensure_isr_loop()
        for change in changes:
            try:
                if isinstance(change, BecomeLeader):
                    self._become_leader(change, image)
                elif isinstance(change, BecomeFollower):
                    self._become_follower(change, image)
                elif isinstance(change, StopReplica):
                    self._stop(change.tp)
            except StorageError:
                # Kafka marks the log directory offline; here the partition stops serving.
                log.exception("%s: storage failed on %s, the replica stops", self.node_id, change)
                self._stop(change.tp)

    def drop_all_roles(self) -> None:
        """The node lost its lease: every role at once (a fenced broker serves nothing); waiting acks=all
        writes fail with NOT_LEADER_OR_FOLLOWER and every fetcher stops. The next apply() restores roles."""
        for tp in list(self._partitions):
            self._stop(tp)

    async def close(self) -> None:
        """Stop fetchers and the ISR loop; every waiting produce is answered NOT_LEADER_OR_FOLLOWER."""
        self._closed = True
        self.drop_all_roles()
        tasks = [t for t in (self._isr_loop, *self._isr_writes.values()) if t is not None]
        for task in tasks:
            task.cancel()
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        await asyncio.gather(*(f.stop() for f in fetchers), *tasks, return_exceptions=True)
        self._appends.wake_all()

    def _become_leader(self, change: BecomeLeader, image: MetadataImage) -> None:
        tp, registration = change.tp, change.registration
        plog = self.logs.get_or_create(tp.topic, tp.partition)
        part = self._partition(tp, plog, image)
        self._unfollow(tp)
        if registration.leader_epoch > part.leader_epoch or not part.is_leader:
            plog.become_leader(registration.leader_epoch)  # Partition.makeLeader's epoch start offset
        revision = self._revision_in(image, tp)
        if registration.partition_epoch >= part.partition_epoch and revision is not None:
            self._revisions[tp] = max(revision, self._revisions.get(tp, 0))
        part.make_leader(registration, self.now_ms())
        self._after_change(tp, part)

    def _become_follower(self, change: BecomeFollower, image: MetadataImage) -> None:
        tp = change.tp
        found = image.partition(tp)
        if found is None:
            return
        registration = found.registration
        plog = self.logs.get_or_create(tp.topic, tp.partition)
        part = self._partition(tp, plog, image)
        if registration.leader == self.node_id:
            return  # an image newer than the change: its BecomeLeader comes with it
        part.make_follower(registration)
        self._revisions.pop(tp, None)
        self._after_change(tp, part)
        if registration.leader == NO_LEADER or registration.leader not in image.brokers:
            self._unfollow(tp)  # nobody to fetch from: keep the data, wait for an election
            return
        previous = self._followed.get(tp)
        if previous is not None and previous != registration.leader:
            self._unfollow(tp)
        fetcher = self._fetchers.get(registration.leader)
        if fetcher is None:
            endpoint = self._endpoint_factory(registration.leader, self._image)
            fetcher = ReplicaFetcher(self.node_id, registration.leader, endpoint, self, self.config)
            self._fetchers[registration.leader] = fetcher
            fetcher.start()
        self._followed[tp] = registration.leader
        topic = image.topics.get(tp.topic)
        topic_id = topic.info.topic_id if topic is not None and topic.info is not None else None
        fetcher.assign(tp, topic_id, registration.leader_epoch, part, plog)

    def _stop(self, tp: TopicPartition) -> None:
        self._unfollow(tp)
        part = self._partitions.pop(tp, None)
        self._revisions.pop(tp, None)
        if part is not None:
            part.stop()
            self._complete_acks(part)

    def _unfollow(self, tp: TopicPartition) -> None:
        leader = self._followed.pop(tp, None)
        if leader is None:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            return
        fetcher.remove(tp)
        if fetcher.idle:  # ReplicaFetcherManager.shutdownIdleFetcherThreads
            del self._fetchers[leader]
            fetcher.stop_soon()

    def _partition(self, tp: TopicPartition, plog: PartitionLog, image: MetadataImage) -> PartitionReplication:
        part = self._partitions.get(tp)
        if part is None:
            checkpointed = self._checkpointed_hws.get((tp.topic, tp.partition), 0)
            part = PartitionReplication(
                self.node_id, plog,
                min_insync_replicas=self._min_isr(tp.topic, image),
                replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
                is_isr_eligible=self._eligible,
                high_watermark=max(plog.log_start_offset, min(checkpointed, plog.log_end_offset)))
            self._partitions[tp] = part
        part.min_insync_replicas = self._min_isr(tp.topic, image)
        me = image.brokers.get(self.node_id)
        part.local_broker_epoch = me.epoch if me is not None else NO_BROKER_EPOCH
        return part

    def _min_isr(self, topic: str, image: MetadataImage) -> int:
        info = image.topics.get(topic)
        configured = info.info.configs.get("min.insync.replicas") if info is not None and info.info else None
        return int(configured) if configured is not None else self.config.min_insync_replicas

    def _eligible(self, replica_id: int, broker_epoch: int | None) -> bool:
        """Partition.isReplicaIsrEligible: registered, not shutting down, and the broker epoch its fetches
        carry (when they carry one) is its registered one (KIP-903)."""
        broker = self._image().brokers.get(replica_id)
        if broker is None or not broker.may_lead:
            return False
        return broker_epoch is None or broker_epoch == NO_BROKER_EPOCH or broker_epoch == broker.epoch

    @staticmethod
    def _revision_in(image: MetadataImage, tp: TopicPartition) -> int | None:
        found = image.partition(tp)
        return None if found is None else found.mod_revision

    # -- what the serving path asks ----------------------------------------------------------------------

    def replication(self, topic: str, partition: int) -> PartitionReplication | None:
        return self._partitions.get(TopicPartition(topic, partition))

    def broker_epoch(self) -> int:
        me = self._image().brokers.get(self.node_id)
        return me.epoch if me is not None else NO_BROKER_EPOCH

    def produce_error(self, topic: str, partition: int, acks: int) -> ErrorCode:
        """Before appending (ReplicaManager.appendRecords -> Partition.appendRecordsToLeader): only the
        leader takes a produce; acks=all is refused below the effective min ISR."""
        part = self._partitions.get(TopicPartition(topic, partition))
        if part is None:
            return self.not_held_error(topic, partition)
        if not part.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return part.acks_all_check() if acks == -1 else ErrorCode.NONE

    def not_held_error(self, topic: str, partition: int) -> ErrorCode:
        """What a request for a partition this node has no log of is answered (Kafka's getPartitionOrError):
        NOT_LEADER_OR_FOLLOWER when the cluster has it, UNKNOWN_TOPIC_OR_PARTITION when it does not."""
        known = self._image().partition(TopicPartition(topic, partition)) is not None
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def on_leader_append(self, topic: str, partition: int) -> None:
        """The leader's log grew (any acks): followers' long polls wake, and with no other ISR member the
        high watermark may move."""
        tp = TopicPartition(topic, partition)
        part = self._partitions.get(tp)
        if part is None:
            return
        if part.on_leader_append(self.now_ms()):
            self._high_watermark_moved(tp, part)
        self._appends.notify(tp)

    async def wait_acks_all(self, topic: str, partition: int, last_offset: int, timeout_ms: int) -> ErrorCode:
        """An appended acks=all batch ending at `last_offset` waits for the ISR (DelayedProduce): NONE once
        the high watermark passes it, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR then is below min ISR,
        NOT_LEADER_OR_FOLLOWER if this replica stops leading first, REQUEST_TIMED_OUT after `timeout_ms`."""
        part = self._partitions.get(TopicPartition(topic, partition))
        if part is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        ack = part.wait_for(last_offset + 1)
        if ack.done:
            assert ack.error is not None
            return ack.error
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._acks[ack] = future
        try:
            return await asyncio.wait_for(asyncio.shield(future), max(timeout_ms, 0) / 1000)
        except TimeoutError:
            part.expire(ack)
            return ErrorCode.REQUEST_TIMED_OUT
        finally:
            self._acks.pop(ack, None)

    def consumer_fetch_bounds(self, topic: str, partition: int, current_leader_epoch: int,
                              durable_end: int) -> tuple[ErrorCode, int]:
        """A consumer's Fetch of a partition (ReplicaManager.fetchMessages, FetchHighWatermark isolation):
        the leader epoch check of Partition.fetchRecords (NOT_LEADER_OR_FOLLOWER on a follower: consumers
        read from leaders here, no KIP-392), and how far it may read: the high watermark, never past the
        leader's fsynced end `durable_end`."""
        part = self._partitions.get(TopicPartition(topic, partition))
        if part is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        error = part.check_current_leader_epoch(current_leader_epoch)
        if error is not ErrorCode.NONE:
            return error, -1
        return ErrorCode.NONE, min(part.fetchable_end(from_follower=False), durable_end)

    def offset_for_leader_epoch(self, topic: str, partition: int, current_leader_epoch: int, epoch: int,
                                replica_id: int) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch (ReplicaManager.lastOffsetForLeaderEpoch): (error, epoch, end offset). A
        follower's request (replica id >= 0) may be answered by a follower, a consumer's by the leader."""
        part = self._partitions.get(TopicPartition(topic, partition))
        if part is None:
            return self.not_held_error(topic, partition), UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        error, found = part.offset_for_leader_epoch(current_leader_epoch, epoch, require_leader=replica_id < 0)
        return error, found.epoch, found.end_offset

    # -- the leader side of a follower's Fetch ------------------------------------------------------------

    async def serve_replica_fetch(self, request: m.FetchRequest, version: int) -> m.FetchResponse:
        """A Fetch from a replica (ReplicaManager.fetchMessages with a replica id): each partition through
        PartitionReplication.on_follower_fetch, then read from the fetch offset to the log end; waits up to
        max_wait_ms for min_bytes, woken by appends (DelayedFetch). Topics by id from v13 (the cluster's
        ids, from the metadata image)."""
        if version >= 15:
            replica_id, broker_epoch = request.replica_state.replica_id, request.replica_state.replica_epoch
        else:
            replica_id, broker_epoch = request.replica_id, NO_BROKER_EPOCH
        names = _topic_names(self._image()) if version >= 13 else {}
        wanted = [(t.topic if version < 13 else names.get(t.topic_id), p) for t in request.topics for p in t.partitions]
        known = [TopicPartition(name, p.partition) for name, p in wanted if name is not None]
        deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
        while True:
            reads, total, answered = self._read_for_replica(wanted, replica_id, broker_epoch, request.max_bytes, version)
            remaining = deadline - time.monotonic()
            if total >= request.min_bytes or answered or remaining <= 0 or self._closed or not known:
                break
            await self._appends.wait(known, remaining)
        topics = []
        it = iter(reads)
        for t in request.topics:
            partitions: list[Any] = [next(it) for _ in t.partitions]
            topics.append(m.FetchResponse.FetchableTopicResponse(
                topic=t.topic, topic_id=t.topic_id, partitions=partitions))
        return m.FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=topics)

    def _read_for_replica(self, wanted: list[tuple[str | None, Any]], replica_id: int, broker_epoch: int,
                          max_bytes: int, version: int) -> tuple[list[Any], int, bool]:
        PD = m.FetchResponse.PartitionData
        reads: list[Any] = []
        total = 0
        answered = False  # an error or a diverging epoch answers at once
        now = self.now_ms()
        for name, p in wanted:
            if name is None:
                reads.append(PD(partition_index=p.partition, error_code=ErrorCode.UNKNOWN_TOPIC_ID))
                answered = True
                continue
            tp = TopicPartition(name, p.partition)
            part = self._partitions.get(tp)
            if part is None:
                reads.append(PD(partition_index=p.partition, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER))
                answered = True
                continue
            decision = part.on_follower_fetch(
                replica_id, p.fetch_offset, p.current_leader_epoch if version >= 9 else NO_EPOCH,
                p.last_fetched_epoch if version >= 12 else NO_EPOCH, now,
                follower_log_start_offset=p.log_start_offset if version >= 5 else -1, broker_epoch=broker_epoch)
            if decision.isr_change is not None:
                self._submit_isr_change(tp, part, decision.isr_change)
            if decision.high_watermark_advanced:
                self._high_watermark_moved(tp, part)
            common = dict(partition_index=p.partition, high_watermark=decision.high_watermark,
                          last_stable_offset=decision.high_watermark, log_start_offset=decision.log_start_offset,
                          preferred_read_replica=-1, aborted_transactions=None)
            if decision.error is not ErrorCode.NONE:
                reads.append(PD(error_code=decision.error, records=None, **common))
                answered = True
                continue
            if decision.diverging_epoch is not None:
                diverging = m.FetchResponse.EpochEndOffset(epoch=decision.diverging_epoch.epoch,
                                                           end_offset=decision.diverging_epoch.end_offset)
                reads.append(PD(error_code=ErrorCode.NONE, records=b"", diverging_epoch=diverging, **common))
                answered = True
                continue
            plog = part.log
            assert isinstance(plog, PartitionLog)
            records = b""
            budget = min(p.partition_max_bytes, max_bytes - total)
            if p.fetch_offset < plog.log_end_offset and (budget > 0 or total == 0):
                try:
                    records = plog.read(p.fetch_offset, max(budget, 1))
                except StorageError as exc:
                    log.error("%s: read for replica %d failed: %s", tp, replica_id, exc)
                    reads.append(PD(error_code=ErrorCode.KAFKA_STORAGE_ERROR, records=None, **common))
                    answered = True
                    continue
                if total and len(records) > budget:
                    records = b""
            total += len(records)
            reads.append(PD(error_code=ErrorCode.NONE, records=records, **common))
        return reads, total, answered

    # -- the high watermark and waiting produces ---------------------------------------------------------

    def _after_change(self, tp: TopicPartition, part: PartitionReplication) -> None:
        """A role change may complete (or fail) waiting produces and move the high watermark."""
        self._complete_acks(part)
        if self._on_high_watermark is not None:
            self._on_high_watermark(tp)

    def _high_watermark_moved(self, tp: TopicPartition, part: PartitionReplication) -> None:
        self._complete_acks(part)
        if self._on_high_watermark is not None:
            self._on_high_watermark(tp)

    def _complete_acks(self, part: PartitionReplication) -> None:
        for ack in part.take_completed():
            future = self._acks.get(ack)
            if future is not None and not future.done():
                assert ack.error is not None
                future.set_result(ack.error)

    def follower_high_watermark_moved(self, tp: TopicPartition) -> None:
        """Told by a fetcher after a response moved a follower's high watermark (nothing waits on it yet:
        the coordinators of the next issue will)."""

    # -- the ISR: expiration and compare-and-set writes ----------------------------------------------------

    def _ensure_isr_loop(self) -> None:
        if self._isr_loop is None:
            self._isr_loop = asyncio.get_running_loop().create_task(self._expire_isr(), name="kcoord isr-expiration")
            self.logs.start_high_watermark_checkpoints(self.high_watermarks)

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        """Every replica's high watermark (ReplicaManager.checkpointHighWatermarks' source)."""
        return {(tp.topic, tp.partition): part.high_watermark for tp, part in self._partitions.items()}

    async def _expire_isr(self) -> None:
        """ReplicaManager's `isr-expiration` task: every replica.lag.time.max.ms / 2."""
        interval = self.config.replica_lag_time_max_ms / 2000
        while True:
            await asyncio.sleep(interval)
            self.shrink_isrs()

    def shrink_isrs(self) -> None:
        """One round of ISR expiration (maybeShrinkIsr on every led partition)."""
        now = self.now_ms()
        for tp, part in list(self._partitions.items()):
            if part.is_leader:
                request = part.maybe_shrink_isr(now)
                if request is not None:
                    self._submit_isr_change(tp, part, request)

    def _submit_isr_change(self, tp: TopicPartition, part: PartitionReplication, request: IsrChangeRequest) -> None:
        running = self._isr_writes.get(tp)
        if running is not None and not running.done():
            return  # PartitionReplication keeps one change in flight; this one replaces nothing
        task = asyncio.get_running_loop().create_task(self._write_isr(tp, part, request), name=f"kcoord isr {tp}")
        self._isr_writes[tp] = task

    async def _write_isr(self, tp: TopicPartition, part: PartitionReplication, request: IsrChangeRequest) -> None:
        """AlterPartitionManager + Partition.handleAlterPartitionUpdate/Error, with the leader's own CAS."""
        while not self._closed and self._partitions.get(tp) is part:
            revision = self._revisions.get(tp)
            if revision is None:
                return
            image = self._image()
            try:
                error = await write_isr_change(self.store, tp.topic, tp.partition, revision, request,
                                               image.live_brokers(), image.broker_epochs())
                kv = await self.store.get(keys.partition_key(tp.topic, tp.partition)) if error in (
                    ErrorCode.NONE, ErrorCode.NEW_LEADER_ELECTED) else None
            except asyncio.CancelledError:
                raise
            except Exception:  # the store is unreachable: the change may be sent again
                log.warning("%s: ISR change %s not written, retrying", tp, request.new_isr, exc_info=True)
                await asyncio.sleep(ISR_RETRY_S * 10)
                continue
            if self._partitions.get(tp) is not part:
                return
            if kv is not None and error is ErrorCode.NONE:
                registration = PartitionRegistration.decode(kv.value)
                self._revisions[tp] = max(kv.mod_revision, self._revisions.get(tp, 0))
                log.info("%s: ISR now %s (leader epoch %d)", tp, registration.isr, registration.leader_epoch)
                if part.on_isr_change_committed(registration, self.now_ms()):
                    self._high_watermark_moved(tp, part)
                self._complete_acks(part)
                return
            again = part.on_isr_change_failed(error)
            log.info("%s: ISR change to %s refused: %s", tp, request.new_isr, error.name)
            if again is None:
                return
            request = again
            await asyncio.sleep(ISR_RETRY_S)


def _topic_names(image: MetadataImage) -> dict[Any, str]:
    return {t.info.topic_id: name for name, t in image.topics.items() if t.info is not None}


__all__ = ["ReplicaManager", "ReplicationConfig", "tcp_endpoint"]
