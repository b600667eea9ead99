"""The controller: one node at a time decides elections and creates topics, every write fenced by its epoch.

Kafka's ZooKeeper-era KafkaController (core/src/main/scala/kafka/controller/KafkaController.scala, 3.x)
with etcd in ZooKeeper's place, and KRaft's rules (PartitionChangeBuilder via
kcoord.cluster.partition_change) for what each change is:

- **Election** (KafkaController.elect, KafkaZkClient.registerControllerAndIncrementControllerEpoch): every
  node is a candidate. Acquire = one txn `create_revision(controller) == 0 -> put controller` under the
  node's own lease; the key's create_revision is the controller epoch (ZooKeeper needed a separate
  `/controller_epoch` znode; etcd's revision is global and increasing, so the creation revision is
  already a fencing token). A loser watches for the key's delete (the holder's lease expired or was
  revoked) and tries again.
- **Fencing**: every controller write is a txn comparing `create_revision(controller) == epoch`
  (Kafka's `CheckOp(/controller_epoch)`, wrapRequestWithControllerEpochCheck). A deposed controller,
  paused past its lease and resumed, cannot write: its compare fails and it steps down (Deposed).
  Partition writes also compare the partition key's mod_revision with the one read (ZooKeeper's
  conditional setData on the zkVersion, KafkaZkClient.updateLeaderAndIsr); a refusal re-reads that
  partition and recomputes, as the ZK controller retried BADVERSION partitions.
- **Failover** (onControllerFailover): read everything at revision R, watch from R + 1; first elect
  for partitions whose leader or ISR members are gone (the ZK controller's
  triggerOnlinePartitionStateChange after initializing its context).
- **Broker changes** (processBrokerChange -> onBrokerFailure / onBrokerStartup): a registration deleted
  (lease expired = fenced) or marked shutting_down (controlled shutdown, KafkaController.
  doControlledShutdown; KRaft's handleBrokerInControlledShutdown) takes the broker out of every ISR it
  is in (except as the last member) and moves its leaderships to a live ISR member, or leaves the
  partition leaderless when none is live and unclean election is off (no data lost). A registration
  appearing gives leaderless partitions a leader again (KRaft's handleBrokerUnfenced).
- **Topics** (KafkaController.processTopicChange -> onNewPartitionCreation; KRaft's
  ReplicationControlManager.createTopic): replicas placed by kcoord.cluster.replica_placement over the
  registered brokers; the topic key and its partition keys written in txns of at most 128 operations,
  the topic key first.
- **ElectLeaders** (KafkaController.electLeaders / KRaft's ReplicationControlManager.electLeaders):
  preferred or unclean, per partition, with partition_change.elect_leader.
- **Reassignments** (KIP-455 as KRaft runs them: ReplicationControlManager.alterPartitionReassignments,
  listPartitionReassignments): start writes RS = TRS + removing with adding / removing recorded in the
  registration; the new replicas become followers (the role diff) and the leaders add them to the ISR as
  they catch up; the controller re-checks every reassigning partition whose key changes in a batch it
  observes (and all of them at failover) and completes it once TRS is in the ISR (partition_change.
  build_change -> complete_reassignment: the removed replicas go, the leader moves if it was one of
  them). Null replicas cancel (cancel_reassignment).
- **DeleteTopics** (ReplicationControlManager.deleteTopics): the topic key and every partition key
  deleted in one txn behind the epoch compare; each replica's role diff then says StopReplica.
- **CreatePartitions** (ReplicationControlManager.createPartitions): the new partitions placed (or
  checked, when assigned by hand) with the topic's replication factor; the topic key (compared on its
  mod_revision) and the new partition keys in one txn.
ISR changes are not the controller's: leaders CAS their own (kcoord.cluster.isr).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kcoord.cluster import keys
from kcoord.cluster.keys import ControllerInfo, TopicInfo
from kcoord.cluster.metadata_image import EMPTY, MetadataImage, PartitionImage, TopicPartition
from kcoord.cluster.partition_change import (
    Election,
    Outcome,
    broker_fenced,
    build_change,
    cancel_reassignment,
    complete_reassignment,
    elect_leader,
    start_reassignment,
)
from kcoord.cluster.partition_state import PartitionRegistration, initial_registration
from kcoord.cluster.replica_placement import (
    PlacementError,
    RandomSource,
    check_added_assignments,
    check_manual_assignments,
    place_replicas,
)
from kcoord.metadata.store import (
    Compacted,
    Compare,
    Delete,
    Get,
    KeyValue,
    LeaseLost,
    LeaseNotFound,
    MetadataStore,
    Op,
    Put,
    WatchEvent,
    absent,
    created_at,
    modified_at,
    present,
)
from kcoord.protocol.errors import ErrorCode

log = logging.getLogger("kcoord.cluster.controller")

MAX_TXN_OPS = 128  # etcd's default --max-txn-ops, per branch
UNCLEAN_CONFIG = "unclean.leader.election.enable"


class Deposed(Exception):
    """The controller epoch compare failed: another node is controller now (or none is). The write was
    not made; the former controller stops acting and campaigns again."""


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    topic_id: uuid.UUID | None = None
    assignment: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


Compute = Callable[[PartitionRegistration], PartitionRegistration | None]


class ControllerWriter:
    """The writes of one controller epoch. Each is a txn whose first compare is the epoch; a refusal on
    it raises Deposed, whatever else the txn held. Kept apart from Controller so that a writer that
    outlived its epoch (a paused controller that resumes) is visibly the same code path."""

    def __init__(self, store: MetadataStore, epoch: int) -> None:
        self.store = store
        self.epoch = epoch
        self.cas_retries = 0  # partition writes refused on the mod_revision and recomputed

    def _fence(self) -> Compare:
        return created_at(keys.CONTROLLER, self.epoch)

    async def write_partition(self, tp: TopicPartition, part: PartitionImage,
                              compute: Compute) -> PartitionImage | None:
        """Write `compute(current)` by CAS on the partition's mod_revision, recomputing from a fresh read
        until it lands or `compute` says no change (None). Returns the state written, else None."""
        key = keys.partition_key(tp.topic, tp.partition)
        while True:
            new = compute(part.registration)
            if new is None:
                return None
            new = new.changed(partition_epoch=part.registration.partition_epoch + 1)
            result = await self.store.txn([self._fence(), modified_at(key, part.mod_revision)],
                                          [Put(key, new.encode())], [Get(keys.CONTROLLER), Get(key)])
            if result.succeeded:
                return PartitionImage(new, result.revision)
            self._check_epoch(result.responses[0])
            found = result.responses[1]
            if not found:
                return None  # the partition is gone (its topic deleted)
            assert isinstance(found, tuple)
            part = PartitionImage(PartitionRegistration.decode(found[0].value), found[0].mod_revision)
            self.cas_retries += 1
            log.info("controller %d: %s changed under us (now at revision %d); recomputing",
                     self.epoch, tp, part.mod_revision)

    async def create_topic(self, name: str, info: TopicInfo,
                           registrations: Sequence[PartitionRegistration]) -> list[KeyValue] | None:
        """The topic key, then its partitions, in txns of at most MAX_TXN_OPS puts; the first txn also
        requires the topic to be absent, the later ones that it is the same topic. None: it exists."""
        topic = keys.topic_key(name)
        puts: list[Op] = [Put(topic, info.encode())]
        puts += [Put(keys.partition_key(name, i), r.encode()) for i, r in enumerate(registrations)]
        written: list[KeyValue] = []
        compares = [self._fence(), absent(topic)]
        for start in range(0, len(puts), MAX_TXN_OPS):
            chunk = puts[start:start + MAX_TXN_OPS]
            result = await self.store.txn(compares, chunk, [Get(keys.CONTROLLER), Get(topic)])
            if not result.succeeded:
                self._check_epoch(result.responses[0])
                return None
            if start == 0:
                compares = [self._fence(), created_at(topic, result.revision)]
            written += [KeyValue(op.key, op.value, result.revision, result.revision, 1)
                        for op in chunk if isinstance(op, Put)]
        return written

    async def delete_topic(self, name: str) -> bool:
        """The topic key, all its partition keys and its changed configs, in one txn. False: the topic was
        already gone."""
        topic = keys.topic_key(name)
        result = await self.store.txn([self._fence(), present(topic)],
                                      [Delete(topic), Delete(keys.partition_key(name, 0)[:-1], prefix=True),
                                       Delete(keys.topic_configs_key(name))],  # its changed configs go with it
                                      [Get(keys.CONTROLLER)])
        if not result.succeeded:
            self._check_epoch(result.responses[0])
        return result.succeeded

    async def add_partitions(self, name: str, info: TopicInfo,
                             added: Mapping[int, PartitionRegistration]) -> list[KeyValue] | None:
        """The topic key with its new assignment (the topic must still exist: only the controller writes
        topic keys, under its lock) and the new partition keys (which must be absent), in one txn. None:
        the topic was deleted or the partitions exist."""
        topic = keys.topic_key(name)
        ops: list[Op] = [Put(topic, info.encode())]
        ops += [Put(keys.partition_key(name, i), r.encode()) for i, r in sorted(added.items())]
        compares = [self._fence(), present(topic)]
        compares += [absent(keys.partition_key(name, i)) for i in sorted(added)]
        result = await self.store.txn(compares, ops, [Get(keys.CONTROLLER)])
        if not result.succeeded:
            self._check_epoch(result.responses[0])
            return None
        return [KeyValue(op.key, op.value, result.revision, result.revision, 1) for op in ops if isinstance(op, Put)]

    def _check_epoch(self, found: object) -> None:
        if not isinstance(found, tuple) or not found or found[0].create_revision != self.epoch:
            raise Deposed(f"controller epoch {self.epoch} is over")


class Controller:
    """A node's controller candidacy and, while it wins, the active controller. `run()` is its task; the
    admin operations answer NOT_CONTROLLER unless this node is the active controller."""

    def __init__(self, store: MetadataStore, node_id: int, lease_id: int, *,
                 rng: RandomSource | None = None, unclean_leader_election_enable: bool = False) -> None:
        self._store = store
        self.node_id = node_id
        self._lease_id = lease_id
        self._rng: RandomSource = rng or random.Random()
        self._unclean_default = unclean_leader_election_enable
        self._image = EMPTY
        self._writer: ControllerWriter | None = None
        self._lock = asyncio.Lock()  # one controller operation at a time: a batch's reaction or an admin op
        self.elections = 0  # how many times this node won

    @property
    def epoch(self) -> int | None:
        """The controller epoch while this node is the active controller, else None."""
        return None if self._writer is None else self._writer.epoch

    @property
    def writer(self) -> ControllerWriter | None:
        return self._writer

    @property
    def image(self) -> MetadataImage:
        return self._image

    # -- candidacy -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign, lead while elected, campaign again when deposed; until cancelled. Raises LeaseLost
        when the node's lease is gone (the node re-registers and starts a new candidacy)."""
        while True:
            epoch = await self._campaign()
            self.elections += 1
            log.info("node %d is the controller, epoch %d", self.node_id, epoch)
            try:
                await self._lead(ControllerWriter(self._store, epoch))
            except Deposed as exc:
                log.warning("node %d is no longer the controller: %s", self.node_id, exc)
            finally:
                self._writer = None

    async def _campaign(self) -> int:
        info = ControllerInfo(self.node_id).encode()
        while True:
            try:
                result = await self._store.txn([absent(keys.CONTROLLER)],
                                               [Put(keys.CONTROLLER, info, self._lease_id)], [Get(keys.CONTROLLER)])
            except LeaseNotFound as exc:
                raise LeaseLost(self._lease_id) from exc
            if result.succeeded:
                return result.revision
            await self._until_controller_deleted(result.revision + 1)

    async def _until_controller_deleted(self, from_revision: int) -> None:
        async with contextlib.aclosing(self._store.watch(keys.CONTROLLER, from_revision)) as watch:
            async for batch in watch:
                if any(e.key == keys.CONTROLLER and e.type == "delete" for e in batch):
                    return

    # -- the active controller -----------------------------------------------------------------------

    async def _lead(self, writer: ControllerWriter) -> None:
        while True:
            snapshot = await self._store.range("")
            image = MetadataImage.from_snapshot(snapshot)
            if image.controller is None or image.controller.epoch != writer.epoch:
                raise Deposed(f"controller epoch {writer.epoch} ended before its failover")
            async with self._lock:
                self._image, self._writer = image, writer
                await self._reconcile()  # onControllerFailover: elect where leaders or ISR members are gone
            try:
                async with contextlib.aclosing(self._store.watch("", snapshot.revision + 1)) as watch:
                    async for batch in watch:
                        async with self._lock:
                            old, self._image = self._image, self._image.apply(batch)
                            current = self._image.controller
                            if current is None or current.epoch != writer.epoch:
                                raise Deposed(f"the controller key of epoch {writer.epoch} is gone")
                            if _liveness(old) != _liveness(self._image):
                                await self._reconcile()
                            await self._complete_reassignments(_reassigning_in(batch, self._image))
            except Compacted:
                log.info("controller %d: history compacted; reading the state again", writer.epoch)

    async def _reconcile(self) -> None:
        """Every partition to the state the live brokers allow: members no longer live out of the ISR
        (not the last one), leaders from the live ISR, leaderless partitions led again when a member of
        their ISR is back (onBrokerFailure / onBrokerStartup; KRaft's handleBrokerFenced / Unfenced /
        InControlledShutdown). Run under the lock."""
        live = self._image.live_brokers()
        for tp, part in list(self._image.partitions()):
            unclean = self._unclean(tp.topic)
            await self._write(tp, part, lambda reg, u=unclean: _wanted(reg, live, u))
        await self._complete_reassignments([tp for tp, part in self._image.partitions()
                                            if part.registration.is_reassigning])

    async def _complete_reassignments(self, tps: Iterable[TopicPartition]) -> None:
        """Finish each reassignment whose target replicas are all in the ISR now (the controller's reaction
        to an ISR expansion it observes; KRaft finishes it inside the AlterPartition that expands the
        ISR, ReplicationControlManager.alterPartition -> PartitionChangeBuilder). Run under the lock."""
        live = self._image.live_brokers()
        for tp in tps:
            part = self._image.partition(tp)
            if part is None or not part.registration.is_reassigning:
                continue
            unclean = self._unclean(tp.topic)
            written = await self._write(tp, part, lambda reg, u=unclean: _completed(reg, live, u))
            if written is not None:
                reg = written.registration
                log.info("controller %d: reassignment of %s complete: replicas %s, leader %d",
                         self.epoch or -1, tp, list(reg.replicas), reg.leader)

    async def _write(self, tp: TopicPartition, part: PartitionImage, compute: Compute) -> PartitionImage | None:
        assert self._writer is not None
        written = await self._writer.write_partition(tp, part, compute)
        if written is not None:
            key = keys.partition_key(tp.topic, tp.partition)
            kv = KeyValue(key, written.registration.encode(), 0, written.mod_revision, 0)
            self._image = self._image.apply_kvs([kv], 0)
        return written

    async def _brokers_now(self) -> MetadataImage:
        """The registered brokers as the store has them now, for a request that names or places replicas.
        The image follows the watch, which may not yet have delivered a registration made a moment ago: a
        cluster just started lists a broker through every node's Metadata while this image still lacks it,
        and a manual assignment naming it would be refused. The ZooKeeper-era admin path read /brokers/ids
        at the request the same way (AdminZkClient.createTopic: getBrokerMetadatas)."""
        return MetadataImage.from_snapshot(await self._store.range(keys.BROKERS))

    def _unclean(self, topic: str) -> bool:
        t = self._image.topics.get(topic)
        value = t.info.configs.get(UNCLEAN_CONFIG) if t is not None and t.info is not None else None
        return self._unclean_default if value is None else value.strip().lower() == "true"

    # -- admin operations ----------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str] | None = None,
                           assignments: Mapping[int, Sequence[int]] | None = None,
                           topic_id: uuid.UUID | None = None) -> CreateTopicResult:
        """CreateTopics for one topic (ReplicationControlManager.createTopic; ZK: AdminZkClient.
        createTopicWithAssignment then the controller's onNewPartitionCreation)."""
        async with self._lock:
            if self._writer is None:
                return CreateTopicResult(ErrorCode.NOT_CONTROLLER, f"node {self.node_id} is not the controller")
            if name in self._image.topics:
                return CreateTopicResult(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            brokers = await self._brokers_now()
            live = brokers.live_brokers()
            try:
                if assignments is not None:
                    lists = check_manual_assignments(list(assignments.items()), set(brokers.brokers), live)
                else:
                    if partitions <= 0:
                        return CreateTopicResult(ErrorCode.INVALID_PARTITIONS,
                                                 f"Number of partitions was set to an invalid value {partitions}.")
                    lists = place_replicas(brokers.usable_brokers(), partitions, replication_factor, self._rng)
            except PlacementError as exc:
                return CreateTopicResult(exc.code, exc.message)
            tid = topic_id or uuid.uuid4()
            info = TopicInfo(tid, dict(enumerate(lists)), dict(configs or {}))
            registrations = [initial_registration(replicas, live) for replicas in lists]
            try:
                written = await self._writer.create_topic(name, info, registrations)
            except Deposed as exc:
                return CreateTopicResult(ErrorCode.NOT_CONTROLLER, str(exc))
            if written is None:
                return CreateTopicResult(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            self._image = self._image.apply_kvs(written, 0)
            return CreateTopicResult(topic_id=tid, assignment=info.replicas)

    async def elect_leaders(self, partitions: Iterable[TopicPartition],
                            election: Election) -> dict[TopicPartition, Outcome]:
        """ElectLeaders (KIP-460): per partition, the error Kafka answers and the registration written."""
        results: dict[TopicPartition, Outcome] = {}
        async with self._lock:
            for tp in partitions:
                if self._writer is None:
                    results[tp] = Outcome(ErrorCode.NOT_CONTROLLER)
                    continue
                part = self._image.partition(tp)
                if part is None:
                    results[tp] = Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                live = self._image.live_brokers()
                last: list[Outcome] = []

                def compute(reg: PartitionRegistration, last: list[Outcome] = last,
                            live: frozenset[int] = live) -> PartitionRegistration | None:
                    last.append(elect_leader(reg, election, live))
                    return last[-1].registration

                try:
                    written = await self._write(tp, part, compute)
                except Deposed as exc:
                    results[tp] = Outcome(ErrorCode.NOT_CONTROLLER, message=str(exc))
                    continue
                outcome = last[-1]
                results[tp] = Outcome(outcome.error, written.registration if written else None, outcome.message)
        return results

    async def alter_partition_reassignments(
            self, targets: Iterable[tuple[TopicPartition, Sequence[int] | None]], *,
            allow_replication_factor_change: bool = True) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments (ReplicationControlManager.alterPartitionReassignments): per
        partition, start (or replace) a reassignment to the target replicas, or cancel it (None)."""
        results: dict[TopicPartition, Outcome] = {}
        async with self._lock:
            brokers = await self._brokers_now() if self._writer is not None else self._image
            for tp, target in targets:
                results[tp] = await self._reassign(tp, target, allow_replication_factor_change, brokers)
        return results

    async def _reassign(self, tp: TopicPartition, target: Sequence[int] | None, allow_rf_change: bool,
                        brokers: MetadataImage) -> Outcome:
        if self._writer is None:
            return Outcome(ErrorCode.NOT_CONTROLLER, message=f"node {self.node_id} is not the controller")
        topic = self._image.topics.get(tp.topic)
        if topic is None or topic.info is None:
            return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message=f"Unable to find a topic named {tp.topic}.")
        part = topic.partitions.get(tp.partition)
        if part is None:
            return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           message=f"Unable to find partition {tp.topic}:{tp.partition}.")
        reg = part.registration
        rf = len(reg.replicas) - len(reg.removing_replicas)
        if target is not None and not allow_rf_change and len(target) != rf:
            return Outcome(ErrorCode.INVALID_REPLICATION_FACTOR,
                           message=f"The replication factor is changed from {rf} to {len(target)}")
        unclean = self._unclean(tp.topic)
        registered = frozenset(brokers.brokers)
        live = brokers.live_brokers()
        last: list[Outcome] = []

        def compute(current: PartitionRegistration) -> PartitionRegistration | None:
            outcome = (cancel_reassignment(current, live, unclean_leader_election_enable=unclean) if target is None
                       else start_reassignment(current, target, registered, live))
            last.append(outcome)
            return outcome.registration if outcome.error is ErrorCode.NONE else None

        try:
            written = await self._write(tp, part, compute)
        except Deposed as exc:
            return Outcome(ErrorCode.NOT_CONTROLLER, message=str(exc))
        outcome = last[-1] if last else Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if written is not None:
            await self._complete_reassignments([tp])  # a reorder, or targets already in sync
        return Outcome(outcome.error, written.registration if written else None, outcome.message)

    def list_partition_reassignments(self, tps: Iterable[TopicPartition] | None
                                     ) -> list[tuple[TopicPartition, PartitionRegistration]] | None:
        """The reassigning partitions among `tps` (None: all) as the controller's image has them
        (ReplicationControlManager.listPartitionReassignments: unknown topics and partitions and those not
        reassigning are left out). None when this node is not the active controller."""
        if self._writer is None:
            return None
        image = self._image
        if tps is None:
            found = list(image.partitions())
        else:
            found = [(tp, part) for tp in tps if (part := image.partition(tp)) is not None]
        return [(tp, part.registration) for tp, part in found if part.registration.is_reassigning]

    async def delete_topics(self, names: Iterable[str]) -> dict[str, tuple[ErrorCode, str | None]]:
        """DeleteTopics (ReplicationControlManager.deleteTopics): every partition key and the topic key go
        in one txn; unknown names are UNKNOWN_TOPIC_OR_PARTITION. The caller checked the request's own
        rules (internal topics, delete.topic.enable)."""
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        async with self._lock:
            for name in names:
                if self._writer is None:
                    results[name] = (ErrorCode.NOT_CONTROLLER, f"node {self.node_id} is not the controller")
                    continue
                if name not in self._image.topics:
                    results[name] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                    continue
                try:
                    deleted = await self._writer.delete_topic(name)
                except Deposed as exc:
                    results[name] = (ErrorCode.NOT_CONTROLLER, str(exc))
                    continue
                topic = self._image.topics[name]
                gone = [KeyValue(keys.topic_key(name), b"", 0, 0, 0)]
                gone += [KeyValue(keys.partition_key(name, p), b"", 0, 0, 0) for p in topic.partitions]
                events = [WatchEvent("delete", kv.key, b"", 0, self._image.revision, 0, None) for kv in gone]
                self._image = self._image.apply(events)
                results[name] = (ErrorCode.NONE, None) if deleted else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        return results

    async def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None = None,
                                *, validate_only: bool = False) -> tuple[ErrorCode, str | None]:
        """CreatePartitions for one topic (ReplicationControlManager.createPartitions), its errors and
        messages in Kafka's order."""
        async with self._lock:
            if self._writer is None:
                return ErrorCode.NOT_CONTROLLER, f"node {self.node_id} is not the controller"
            topic = self._image.topics.get(name)
            if topic is None or topic.info is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            current = len(topic.info.replicas)
            if count == current:
                return ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
            if count < current:
                return (ErrorCode.INVALID_PARTITIONS,
                        f"The topic {name} currently has {current} partition(s); {count} would not be an increase.")
            added = count - current
            if assignments is not None and len(assignments) != added:
                return (ErrorCode.INVALID_REPLICATION_ASSIGNMENT, f"Attempted to add {added} additional partition(s), "
                        f"but only {len(assignments)} assignment(s) were specified.")
            rf = len(topic.info.replicas.get(0, ()))
            brokers = await self._brokers_now()
            live = brokers.live_brokers()
            try:
                if assignments is not None:
                    lists = check_added_assignments(assignments, added, rf, current, set(brokers.brokers), live)
                else:
                    lists = place_replicas(brokers.usable_brokers(), added, rf, self._rng)
            except PlacementError as exc:
                return exc.code, exc.message
            if validate_only:
                return ErrorCode.NONE, None
            new = {current + i: initial_registration(replicas, live) for i, replicas in enumerate(lists)}
            info = TopicInfo(topic.info.topic_id, {**topic.info.replicas, **{p: r.replicas for p, r in new.items()}},
                             topic.info.configs)
            try:
                written = await self._writer.add_partitions(name, info, new)
            except Deposed as exc:
                return ErrorCode.NOT_CONTROLLER, str(exc)
            if written is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic changed while its partitions were added."
            self._image = self._image.apply_kvs(written, 0)
            return ErrorCode.NONE, None


def _reassigning_in(batch: Iterable[WatchEvent], image: MetadataImage) -> list[TopicPartition]:
    """The partitions a watch batch wrote that are being reassigned."""
    found = []
    for event in batch:
        parsed = keys.parse_topic_key(event.key)
        if event.type == "put" and parsed is not None and parsed[1] is not None:
            tp = TopicPartition(parsed[0], parsed[1])
            part = image.partition(tp)
            if part is not None and part.registration.is_reassigning:
                found.append(tp)
    return found


def _completed(reg: PartitionRegistration, live: frozenset[int], unclean: bool) -> PartitionRegistration | None:
    """The registration that ends `reg`'s reassignment when its targets are all in sync, else None."""
    if complete_reassignment(reg.replicas, reg.isr, reg.adding_replicas, reg.removing_replicas) is None:
        return None
    return build_change(reg, live, unclean_leader_election_enable=unclean)


def _liveness(image: MetadataImage) -> dict[int, tuple[int, bool]]:
    return {b.id: (b.epoch, b.may_lead) for b in image.brokers.values()}


def _wanted(reg: PartitionRegistration, live: frozenset[int], unclean: bool) -> PartitionRegistration | None:
    """The registration the live brokers call for, or None if it already is it: each ISR member that is
    not live fenced in turn (partition_change.broker_fenced), then a leader for a leaderless partition
    (an ONLINE election: a live ISR member; unclean only if the topic allows). The partition epoch is
    set by the writer (one change = one bump)."""
    new = reg
    for broker in reg.isr:
        if broker not in live:
            new = broker_fenced(new, broker, live, unclean_leader_election_enable=unclean) or new
    if not new.has_leader:
        new = build_change(new, live, unclean_leader_election_enable=unclean) or new
    if new == reg:
        return None
    leader_epoch = reg.leader_epoch + (1 if new.leader_epoch != reg.leader_epoch else 0)
    return new.changed(leader_epoch=leader_epoch)
