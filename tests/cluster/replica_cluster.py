"""Three ReplicaManagers in one process: real storage logs in temporary directories, one LocalStore on a
manual clock (the metadata and the ISR writes), fetchers that reach their leader through an in-process
endpoint which runs the Fetch through the wire codecs (so requests and responses are what TCP would
carry) and can cut a link. The test plays the controller: it writes registrations and calls `refresh`,
which applies the role changes as a node's metadata follower would."""
from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

from kcoord.cluster import keys
from kcoord.cluster.keys import BrokerInfo, TopicInfo
from kcoord.cluster.metadata_image import EMPTY, MetadataImage, TopicPartition, role_changes
from kcoord.cluster.partition_state import PartitionRegistration
from kcoord.cluster.replica_manager import ReplicaManager, ReplicationConfig
from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.store import Put
from kcoord.protocol import messages as m
from kcoord.protocol.records import build_batch
from kcoord.storage.manager import LogManager

TOPIC = "t"
TP = TopicPartition(TOPIC, 0)


class InProcessEndpoint:
    """A follower's connection to a leader's ReplicaManager, through the Fetch codecs."""

    def __init__(self, cluster: ReplicaCluster, follower: int, leader: int) -> None:
        self.cluster, self.follower, self.leader = cluster, follower, leader

    async def fetch(self, request: m.FetchRequest, version: int) -> m.FetchResponse:
        if self.cluster.is_cut(self.follower, self.leader):
            await asyncio.sleep(0.01)
            raise ConnectionError("link cut")
        codec = m.request_codec(1, version)
        decoded, _ = codec.decode(codec.encode(request), 0)
        response = await self.cluster.managers[self.leader].serve_replica_fetch(decoded, version)
        if self.cluster.is_cut(self.follower, self.leader):
            raise ConnectionError("link cut")
        out = m.response_codec(1, version)
        return out.decode(out.encode(response), 0)[0]

    async def close(self) -> None:
        return None


class ReplicaCluster:
    def __init__(self, tmp_path, brokers=(1, 2, 3), *, min_isr: int | None = None, lag_ms: int = 10_000) -> None:
        self.tmp_path = tmp_path
        self.brokers = tuple(brokers)
        self.clock = ManualClock()
        self.store = LocalStore(timer=self.clock.timers)
        self.config = ReplicationConfig(replica_lag_time_max_ms=lag_ms, replica_fetch_wait_max_ms=200,
                                        replica_fetch_backoff_ms=20)
        self.min_isr = min_isr
        self.image: MetadataImage = EMPTY
        self.managers: dict[int, ReplicaManager] = {}
        self.cut: set[tuple[int, int]] = set()

    def is_cut(self, follower: int, leader: int) -> bool:
        return (follower, leader) in self.cut or (follower, None) in self.cut

    async def start(self, replicas=(1, 2, 3), leader: int = 1) -> None:
        for b in self.brokers:
            await self.store.txn([], [Put(keys.broker_key(b), BrokerInfo(b).encode())])
        configs = {"min.insync.replicas": str(self.min_isr)} if self.min_isr else {}
        await self.store.txn([], [
            Put(keys.topic_key(TOPIC), TopicInfo(uuid.uuid4(), {0: tuple(replicas)}, configs).encode()),
            Put(keys.partition_key(TOPIC, 0), PartitionRegistration(tuple(replicas), tuple(replicas), leader).encode()),
        ])
        for b in self.brokers:
            self.managers[b] = ReplicaManager(
                b, LogManager(str(self.tmp_path / f"node{b}")), self.store, self.config, self.clock.now_ms,
                lambda: self.image, endpoint_factory=self._factory(b))
        await self.refresh()

    def _factory(self, follower: int) -> Callable:
        return lambda leader, _images: InProcessEndpoint(self, follower, leader)

    async def refresh(self) -> None:
        """Read the store and apply every node's role changes (the metadata follower's job)."""
        old, self.image = self.image, MetadataImage.from_snapshot(await self.store.range(""))
        for b, rm in self.managers.items():
            rm.apply(role_changes(old, self.image, b), self.image)

    async def registration(self) -> PartitionRegistration:
        kv = await self.store.get(keys.partition_key(TOPIC, 0))
        assert kv is not None
        return PartitionRegistration.decode(kv.value)

    async def elect(self, leader: int, isr: tuple[int, ...]) -> None:
        """What the controller writes for an election: a new leader epoch and partition epoch."""
        current = await self.registration()
        await self.store.txn([], [Put(keys.partition_key(TOPIC, 0), PartitionRegistration(
            current.replicas, isr, leader, current.leader_epoch + 1, current.partition_epoch + 1).encode())])
        await self.refresh()

    def log(self, b: int):
        plog = self.managers[b].logs.get(TOPIC, 0)
        assert plog is not None
        return plog

    def part(self, b: int):
        part = self.managers[b].replication(TOPIC, 0)
        assert part is not None
        return part

    async def produce(self, b: int, count: int = 1, acks: int = -1, timeout_ms: int = 5_000, value: bytes = b"v"):
        """What the Produce handler does on node `b`: checks, append, fsync, then (acks=-1) the ISR."""
        rm = self.managers[b]
        error = rm.produce_error(TOPIC, 0, acks)
        if error:
            return error
        plog = self.log(b)
        info = plog.append(build_batch([(b"k", value)] * count))
        rm.on_leader_append(TOPIC, 0)
        await plog.sync(info)
        if acks != -1:
            return error
        return await rm.wait_acks_all(TOPIC, 0, info.last_offset, timeout_ms)

    def batches(self, b: int, end: int | None = None) -> list[bytes]:
        return [bytes(batch) for _h, batch in self.log(b).batches(max_offset=end)]

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or predicate}")
            await asyncio.sleep(0.01)

    async def close(self) -> None:
        for rm in self.managers.values():
            await rm.close()
            await rm.logs.close()
