"""The node's metadata image and role diff, the follower's snapshot + watch (and re-read after
Compacted), and the registration's lifecycle."""
from __future__ import annotations

import asyncio
import uuid

from kcoord.cluster import keys
from kcoord.cluster.keys import BrokerInfo, TopicInfo
from kcoord.cluster.metadata_image import (
    EMPTY,
    BecomeFollower,
    BecomeLeader,
    MetadataFollower,
    MetadataImage,
    StopReplica,
    TopicPartition,
    role_changes,
)
from kcoord.cluster.partition_state import NO_LEADER, PartitionRegistration
from kcoord.cluster.registration import BrokerRegistration
from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.store import Delete, KeyValue, Put
from tests.cluster.conftest import ON_BOTH

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def image_with(regs: dict[int, PartitionRegistration], revision: int) -> MetadataImage:
    kvs = [KeyValue(keys.topic_key("t"), TopicInfo(uuid.UUID(int=1), {p: r.replicas for p, r in regs.items()})
                    .encode(), 1, 1, 1)]
    kvs += [KeyValue(keys.partition_key("t", p), r.encode(), 1, revision, 1) for p, r in regs.items()]
    return EMPTY.apply_kvs(kvs, revision)


def test_role_changes_for_leader_follower_and_stop():
    """KRaft's TopicsDelta.localChanges as BrokerMetadataPublisher uses it: partitions this node now leads
    (or whose registration changed while it leads), follows under a new leader or epoch, or no longer
    holds; nothing for a partition whose change does not concern its role."""
    before = image_with({
        0: PartitionRegistration((1, 2), (1, 2), leader=1),
        1: PartitionRegistration((2, 1), (2, 1), leader=2),
        2: PartitionRegistration((1, 2), (1, 2), leader=2),
    }, 5)
    after = image_with({
        0: PartitionRegistration((1, 2), (1,), leader=1, partition_epoch=1),  # ISR shrank: still leads
        1: PartitionRegistration((2, 1), (1,), leader=1, leader_epoch=1, partition_epoch=1),  # takes over
        2: PartitionRegistration((2, 3), (2, 3), leader=2, leader_epoch=1, partition_epoch=1),  # moved away
    }, 6)
    assert role_changes(EMPTY, before, 1) == [
        BecomeLeader(T0, 0, before.partition(T0).registration),
        BecomeFollower(T1, 2, 0),
        BecomeFollower(T2, 2, 0),
    ]
    assert role_changes(before, after, 1) == [
        BecomeLeader(T0, 0, after.partition(T0).registration),
        BecomeLeader(T1, 1, after.partition(T1).registration),
        StopReplica(T2),
    ]
    assert role_changes(before, after, 2) == [BecomeFollower(T1, 1, 1),
                                              BecomeLeader(T2, 1, after.partition(T2).registration)]
    assert role_changes(after, after, 1) == []
    # a follower is not told about ISR-only changes; it is told when its leader goes
    offline = image_with({1: PartitionRegistration((2, 1), (1,), leader=NO_LEADER, leader_epoch=2,
                                                   partition_epoch=2)}, 7)
    assert role_changes(after, offline, 2) == [StopReplica(T0), BecomeFollower(T1, NO_LEADER, 2), StopReplica(T2)]


def test_image_skips_a_change_older_than_the_one_it_holds():
    """The controller applies its own writes at once; the watch's copy arriving later changes nothing."""
    new = image_with({0: PartitionRegistration((1,), (1,), leader=1, leader_epoch=3)}, 9)
    old_kv = KeyValue(keys.partition_key("t", 0), PartitionRegistration((1,), (1,), leader=1).encode(), 1, 8, 1)
    assert new.apply_kvs([old_kv], 8).partition(T0).registration.leader_epoch == 3


async def settle(predicate, env_name="local", timeout_s=10.0):
    for _ in range(2000 if env_name == "local" else int(timeout_s * 100)):
        if predicate():
            return
        await asyncio.sleep(0 if env_name == "local" else 0.01)
    raise AssertionError("did not settle")


@ON_BOTH
async def test_follower_applies_batches_in_order_and_reports_role_changes(cluster_env):
    """BrokerMetadataListener / BrokerMetadataPublisher (KRaft): a snapshot at R, then every change from
    R + 1 in revision order, one image per batch; the node's role changes are published with it."""
    store = await cluster_env.store()
    await store.txn([], [Put(keys.broker_key(1), BrokerInfo(1).encode()),
                         Put(keys.broker_key(2), BrokerInfo(2).encode())])
    seen: list[tuple[int, list]] = []
    follower = MetadataFollower(store, 1, lambda old, new, changes: seen.append((new.revision, changes)))
    task = asyncio.create_task(follower.run())
    try:
        await settle(lambda: follower.snapshots == 1 and 1 in follower.image.brokers, cluster_env.name)
        start = follower.image.revision
        reg = PartitionRegistration((1, 2), (1, 2), leader=1)
        info = TopicInfo(uuid.UUID(int=7), {0: (1, 2)})
        r1 = (await store.txn([], [Put(keys.topic_key("t"), info.encode()),
                                   Put(keys.partition_key("t", 0), reg.encode())])).revision
        moved = reg.changed(leader=2, leader_epoch=1, partition_epoch=1)
        r2 = (await store.txn([], [Put(keys.partition_key("t", 0), moved.encode())])).revision
        r3 = (await store.txn([], [Delete(keys.topic_key("t"), prefix=True)])).revision
        await settle(lambda: follower.image.revision == r3, cluster_env.name)
        after = [(rev, ch) for rev, ch in seen if rev > start]
        assert [rev for rev, _ in after] == [r1, r2, r3]
        assert [ch for _, ch in after] == [[BecomeLeader(T0, 0, reg)], [BecomeFollower(T0, 2, 1)],
                                           [StopReplica(T0)]]
        assert "t" not in follower.image.topics
    finally:
        task.cancel()


class CompactingStore:
    """Between the follower's snapshot and its watch, the history it needs is written and compacted."""

    def __init__(self, store, meanwhile):
        self._store = store
        self._meanwhile = meanwhile

    def __getattr__(self, name):
        return getattr(self._store, name)

    async def range(self, prefix):
        snapshot = await self._store.range(prefix)
        if self._meanwhile is not None:
            meanwhile, self._meanwhile = self._meanwhile, None
            await meanwhile()
        return snapshot


async def test_follower_reads_a_new_snapshot_after_compaction_and_diffs_it():
    """KRaft brokers load a snapshot when the log they need is gone (BrokerMetadataListener's snapshot
    path); etcd answers ErrCompacted: the follower re-reads and diffs, so the role change lands once."""
    store = LocalStore(timer=ManualClock().timers)
    reg = PartitionRegistration((1, 2), (1, 2), leader=1)
    info = TopicInfo(uuid.UUID(int=7), {0: (1, 2)})
    await store.txn([], [Put(keys.topic_key("t"), info.encode()), Put(keys.partition_key("t", 0), reg.encode())])
    moved = reg.changed(leader=2, leader_epoch=1, partition_epoch=1)

    async def meanwhile():
        await store.txn([], [Put(keys.partition_key("t", 0), reg.changed(isr=(1,), partition_epoch=1).encode())])
        await store.txn([], [Put(keys.partition_key("t", 0), moved.changed(partition_epoch=2).encode())])
        await store.compact(store.revision)

    seen = []
    follower = MetadataFollower(CompactingStore(store, meanwhile), 1, lambda o, n, ch: seen.append(ch))
    task = asyncio.create_task(follower.run())
    try:
        await settle(lambda: follower.snapshots == 2)
        assert seen == [[BecomeLeader(T0, 0, reg)], [BecomeFollower(T0, 2, 1)]]
        assert follower.image.revision == store.revision
    finally:
        task.cancel()


async def test_registration_waits_for_the_previous_incarnation_and_reports_its_loss():
    """KafkaZkClient.registerBroker (CheckedEphemeral) and KafkaController.processExpire: a restarted node
    whose previous registration is still under its unexpired lease waits for its delete; its broker
    epoch is the key's create_revision; a lost lease is reported once and a new registration has a
    higher epoch."""
    clock = ManualClock()
    store = LocalStore(timer=clock.timers)
    old = BrokerRegistration(store, BrokerInfo(1, incarnation_id="a"), ttl_s=9)
    first = await old.register()
    assert (await store.get(keys.broker_key(1))).create_revision == first
    await old.stop_keep_alive()  # killed: its lease runs out in 9 s
    lost: list[int] = []
    new = BrokerRegistration(store, BrokerInfo(1, incarnation_id="b"), ttl_s=9, on_lost=lost.append)
    registering = asyncio.create_task(new.register())
    for _ in range(10):
        await asyncio.sleep(0)
    assert not registering.done()
    clock.sleep(9_000)
    second = await asyncio.wait_for(registering, 1)
    assert second > first
    assert BrokerInfo.decode((await store.get(keys.broker_key(1))).value).incarnation_id == "b"

    await store.revoke_lease(new.lease_id)  # the store says the lease is gone
    await asyncio.wait_for(new.lost.wait(), 1)
    assert lost == [second] and new.epoch is None
    third = await new.register()
    assert third > second
    assert await new.shutting_down()
    state = BrokerInfo.decode((await store.get(keys.broker_key(1))).value).state
    assert state is keys.BrokerState.SHUTTING_DOWN
    await new.close()
    assert await store.get(keys.broker_key(1)) is None


async def test_a_cordoned_registration_keeps_its_epoch_and_its_broker_gets_no_new_replica():
    """KIP-1066: a broker reports its cordoned directory in its registration (same epoch: KRaft's heartbeat
    updates the registration), and the image's usable brokers for placement leave it out; a registration
    written before the field existed reads as not cordoned."""
    store = LocalStore(timer=ManualClock().timers)
    registrations = {i: BrokerRegistration(store, BrokerInfo(i, incarnation_id=str(i)), ttl_s=9) for i in (1, 2, 3)}
    epochs = {i: await r.register() for i, r in registrations.items()}
    assert await registrations[2].update(cordoned=True)
    assert (await store.get(keys.broker_key(2))).create_revision == epochs[2]
    image = MetadataImage.from_snapshot(await store.range(keys.BROKERS))
    assert [b.id for b in image.usable_brokers()] == [1, 3]
    assert image.live_brokers() == {1, 2, 3}  # it still leads and follows what it has
    assert BrokerInfo.decode(b'{"broker_id": 4, "listeners": []}').cordoned is False
    for registration in registrations.values():
        await registration.close()
