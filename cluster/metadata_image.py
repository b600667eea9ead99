"""What a node knows of the cluster, and how it learns its roles: Kafka 4's way, by following the metadata.

A KRaft broker replays the metadata log into an immutable `MetadataImage`, and for each delta its
`BrokerMetadataPublisher` asks `TopicsDelta.localChanges(brokerId)` which partitions it now leads,
follows or no longer holds (metadata/.../image/TopicsDelta.java, core/.../BrokerMetadataPublisher.scala).
Here the log is the metadata store: `MetadataFollower` reads one snapshot at revision R (a range over
the cluster's keys), then applies the watch from R + 1, one batch (one store revision) at a time, in
order. Each applied batch yields a new immutable image and `role_changes(old, new, node_id)`, a pure
diff: BecomeLeader / BecomeFollower / StopReplica for this node. When the history it watches is
compacted away it reads a fresh snapshot and diffs against it, so no change is missed, only merged.

Every node follows, controller or not; the controller keeps its own image the same way
(kcoord.cluster.controller), so both read one decoding of the keys.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from kcoord.cluster import keys
from kcoord.cluster.keys import BrokerInfo, BrokerState, ControllerInfo, TopicInfo
from kcoord.cluster.partition_state import PartitionRegistration
from kcoord.cluster.replica_placement import UsableBroker
from kcoord.metadata.store import Compacted, KeyValue, MetadataStore, RangeResult, WatchEvent

log = logging.getLogger("kcoord.cluster.metadata")


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class BrokerImage:
    info: BrokerInfo
    epoch: int  # the broker epoch: its registration key's create_revision

    @property
    def id(self) -> int:
        return self.info.broker_id

    @property
    def may_lead(self) -> bool:
        """Registered and not in controlled shutdown (KRaft's ClusterControlManager.isActive)."""
        return self.info.state is BrokerState.RUNNING


@dataclass(frozen=True, slots=True)
class ControllerImage:
    node_id: int
    epoch: int  # the controller epoch: the `controller` key's create_revision


@dataclass(frozen=True, slots=True)
class PartitionImage:
    registration: PartitionRegistration
    mod_revision: int  # the store's CAS token for this partition's key


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    info: TopicInfo | None  # None while only partition keys were seen (a txn split across revisions)
    partitions: Mapping[int, PartitionImage] = field(default_factory=lambda: types.MappingProxyType({}))


def _frozen(d: dict) -> Mapping:
    return types.MappingProxyType(d)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The cluster as of store revision `revision`. Immutable: `apply` returns a new image."""

    revision: int = 0
    brokers: Mapping[int, BrokerImage] = field(default_factory=lambda: _frozen({}))
    controller: ControllerImage | None = None
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: _frozen({}))
    cluster_id: str | None = None

    # -- reading -------------------------------------------------------------------------------------

    def partition(self, tp: TopicPartition) -> PartitionImage | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def partitions(self) -> Iterable[tuple[TopicPartition, PartitionImage]]:
        for name, topic in sorted(self.topics.items()):
            for index, part in sorted(topic.partitions.items()):
                yield TopicPartition(name, index), part

    def live_brokers(self) -> frozenset[int]:
        """Brokers that may lead and join ISRs: registered, not shutting down."""
        return frozenset(b.id for b in self.brokers.values() if b.may_lead)

    def usable_brokers(self) -> list[UsableBroker]:
        """Where new replicas may go, by id: live brokers with a log directory that is not cordoned (KIP-1066)."""
        return [UsableBroker(b.id, b.info.rack) for b in sorted(self.brokers.values(), key=lambda b: b.id)
                if b.may_lead and not b.info.cordoned]

    def broker_epochs(self) -> dict[int, int]:
        return {b.id: b.epoch for b in self.brokers.values()}

    def led_by(self, node_id: int) -> list[TopicPartition]:
        return [tp for tp, part in self.partitions() if part.registration.leader == node_id]

    # -- building ------------------------------------------------------------------------------------

    @classmethod
    def from_snapshot(cls, snapshot: RangeResult) -> MetadataImage:
        return cls(revision=snapshot.revision).apply_kvs(snapshot.kvs, snapshot.revision)

    def apply_kvs(self, kvs: Iterable[KeyValue], revision: int) -> MetadataImage:
        """The image with these keys' current values (the controller's own writes, a re-read)."""
        events = [WatchEvent("put", kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, None)
                  for kv in kvs]
        return self.apply(events, revision)

    def apply(self, events: Iterable[WatchEvent], revision: int | None = None) -> MetadataImage:
        """The image after one watch batch (one store revision). A change older than what the image
        holds for that key (the controller may have applied its own write first) is skipped."""
        brokers = dict(self.brokers)
        topics = dict(self.topics)
        controller = self.controller
        cluster_id = self.cluster_id
        last = self.revision
        for event in events:
            last = max(last, event.mod_revision)
            key = event.key
            put = event.type == "put"
            if key == keys.CONTROLLER:
                if put:
                    controller = ControllerImage(ControllerInfo.decode(event.value).node_id, event.create_revision)
                elif controller is not None and (event.prev is None
                                                 or event.prev.create_revision == controller.epoch):
                    controller = None
                continue
            if key == keys.CLUSTER_ID:
                cluster_id = event.value.decode() if put else None
                continue
            broker_id = keys.parse_broker_key(key)
            if broker_id is not None:
                current = brokers.get(broker_id)
                if put:
                    if current is None or event.create_revision >= current.epoch:
                        brokers[broker_id] = BrokerImage(BrokerInfo.decode(event.value), event.create_revision)
                elif current is not None and (event.prev is None or event.prev.create_revision == current.epoch):
                    del brokers[broker_id]
                continue
            parsed = keys.parse_topic_key(key)
            if parsed is None:
                continue  # keys this image does not keep (configs, ACLs, ...)
            name, index = parsed
            topic = topics.get(name) or TopicImage(name, None)
            if index is None:
                if put:
                    topics[name] = replace(topic, info=TopicInfo.decode(event.value))
                else:
                    topics.pop(name, None)
                continue
            parts = dict(topic.partitions)
            old = parts.get(index)
            if put:
                if old is not None and old.mod_revision > event.mod_revision:
                    continue
                parts[index] = PartitionImage(PartitionRegistration.decode(event.value), event.mod_revision)
            else:
                parts.pop(index, None)
            if topic.info is None and not parts:
                topics.pop(name, None)
            else:
                topics[name] = replace(topic, partitions=_frozen(parts))
        return MetadataImage(max(last, revision or 0), _frozen(brokers), controller, _frozen(topics), cluster_id)


EMPTY = MetadataImage()


# -- the node's roles ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BecomeLeader:
    """This node leads `tp`. Emitted when it becomes leader and again on every later change of the
    partition while it leads (an ISR the controller shrank, a new leader epoch), as KRaft's localChanges
    lists every changed partition: compare `leader_epoch` with the one held to tell a new term."""

    tp: TopicPartition
    leader_epoch: int
    registration: PartitionRegistration


@dataclass(frozen=True, slots=True)
class BecomeFollower:
    """This node replicates `tp` from `leader` (NO_LEADER: nobody leads; stop fetching, keep the data)."""

    tp: TopicPartition
    leader: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class StopReplica:
    """This node is no longer a replica of `tp` (reassigned away, or the topic deleted)."""

    tp: TopicPartition


RoleChange = BecomeLeader | BecomeFollower | StopReplica


def role_changes(old: MetadataImage, new: MetadataImage, node_id: int) -> list[RoleChange]:
    """What changed for `node_id` between two images (TopicsDelta.localChanges): partitions it now leads
    (or leads with a changed registration), follows under a new leader or leader epoch, or stopped
    holding. Sorted by topic and partition; unchanged partitions yield nothing."""
    changes: list[RoleChange] = []
    names = sorted(set(old.topics) | set(new.topics))
    for name in names:
        before = old.topics.get(name)
        after = new.topics.get(name)
        indexes = sorted(set(before.partitions if before else ()) | set(after.partitions if after else ()))
        for index in indexes:
            tp = TopicPartition(name, index)
            was = before.partitions.get(index) if before else None
            now = after.partitions.get(index) if after else None
            was_r = was.registration if was else None
            now_r = now.registration if now else None
            held = was_r is not None and node_id in was_r.replicas
            holds = now_r is not None and node_id in now_r.replicas
            if not holds:
                if held:
                    changes.append(StopReplica(tp))
                continue
            assert now_r is not None
            if now_r.leader == node_id:
                if was_r != now_r:
                    changes.append(BecomeLeader(tp, now_r.leader_epoch, now_r))
            elif not held or was_r is None or was_r.leader == node_id or \
                    (was_r.leader, was_r.leader_epoch) != (now_r.leader, now_r.leader_epoch):
                changes.append(BecomeFollower(tp, now_r.leader, now_r.leader_epoch))
    return changes


# -- following the store ------------------------------------------------------------------------------

Listener = Callable[[MetadataImage, MetadataImage, list[RoleChange]], None]


class MetadataFollower:
    """Keeps `image` current for node `node_id` and tells `listener(old, new, changes)` after each applied
    batch, in revision order. `run()` is the node's metadata task: snapshot, then watch; on Compacted,
    a new snapshot diffed against the image held. The listener must not block: it schedules the node's
    work (partition and coordinator load / unload) on their owners."""

    def __init__(self, store: MetadataStore, node_id: int, listener: Listener | None = None) -> None:
        self._store = store
        self._node_id = node_id
        self._listener = listener
        self._image = EMPTY
        self._waiters: list[tuple[Callable[[MetadataImage], bool], asyncio.Future[MetadataImage]]] = []
        self.snapshots = 0  # how many snapshots were read (1 + one per compaction met)

    @property
    def image(self) -> MetadataImage:
        return self._image

    async def run(self) -> None:
        while True:
            snapshot = await self._store.range("")
            self.snapshots += 1
            self._publish(MetadataImage.from_snapshot(snapshot))
            try:
                async with contextlib.aclosing(self._store.watch("", snapshot.revision + 1)) as watch:
                    async for batch in watch:
                        self._publish(self._image.apply(batch))
            except Compacted as exc:
                log.info("metadata history compacted (from revision %d): reading a new snapshot",
                         exc.compact_revision)

    def _publish(self, new: MetadataImage) -> None:
        old, self._image = self._image, new
        changes = role_changes(old, new, self._node_id)
        if self._listener is not None:
            self._listener(old, new, changes)
        still = []
        for predicate, future in self._waiters:
            if future.done():
                continue
            if predicate(new):
                future.set_result(new)
            else:
                still.append((predicate, future))
        self._waiters = still

    async def wait_for(self, predicate: Callable[[MetadataImage], bool]) -> MetadataImage:
        """The first image (the current one included) for which `predicate` holds: e.g. a controlled
        shutdown waits for `not image.led_by(node_id)` before it revokes its lease."""
        if predicate(self._image):
            return self._image
        future: asyncio.Future[MetadataImage] = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, future))
        return await future
