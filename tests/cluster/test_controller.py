"""Membership and the controller over the metadata store: election, failover, fencing, broker failure and
return, controlled shutdown, topic creation, CAS races. Each runs on LocalStore (manual clock); the key
ones also on a real etcd (slow where leases must expire in real time)."""
from __future__ import annotations

import collections

import pytest

from kcoord.cluster import keys
from kcoord.cluster.controller import MAX_TXN_OPS, Deposed
from kcoord.cluster.isr import write_isr_change
from kcoord.cluster.metadata_image import (
    BecomeFollower,
    BecomeLeader,
    ControllerImage,
    PartitionImage,
    TopicPartition,
)
from kcoord.cluster.partition_change import Election, IsrChangeRequest
from kcoord.cluster.partition_state import NO_LEADER, PartitionRegistration
from kcoord.metadata.store import Put
from kcoord.protocol.errors import ErrorCode
from tests.cluster.conftest import ON_BOTH, SLOW_ON_ETCD, start_nodes
from tests.cluster.nodes import Node, active_controllers


def partitions(image, topic):
    t = image.topics.get(topic)
    return {} if t is None else {p: part.registration for p, part in t.partitions.items()}


async def controller_of(env, nodes, brokers=None):
    """The active controller among `nodes`, once its image holds `brokers` registrations (all nodes)."""
    want = len(nodes) if brokers is None else brokers

    def ready():
        active = active_controllers(nodes)
        return len(active) == 1 and len(active[0].controller.image.brokers) >= want

    await env.settle(ready)
    return active_controllers(nodes)[0]


class InterceptingStore:
    """A store client whose next partition write first runs `before` (another writer's racing txn)."""

    def __init__(self, store, before=None):
        self._store = store
        self.before = before
        self.txn_sizes: list[int] = []

    def __getattr__(self, name):
        return getattr(self._store, name)

    async def txn(self, compares, on_success, on_failure=()):
        self.txn_sizes.append(max(len(on_success), len(on_failure)))
        puts_partition = any(isinstance(op, Put) and "/p/" in op.key for op in on_success)
        if self.before is not None and puts_partition:
            before, self.before = self.before, None
            await before()
        return await self._store.txn(compares, on_success, on_failure)


@ON_BOTH
async def test_one_controller_among_three_candidates(cluster_env):
    """KafkaController.elect / KafkaZkClient.registerControllerAndIncrementControllerEpoch: every broker
    tries to create the controller key; one create wins, its creation revision is the controller epoch,
    and every node learns who won from the metadata."""
    nodes = await start_nodes(cluster_env, 3)
    winner = await controller_of(cluster_env, nodes)
    await cluster_env.settle(lambda: all(n.image.controller is not None for n in nodes))
    kv = await nodes[0].store.get(keys.CONTROLLER)
    assert kv.create_revision == winner.controller.epoch
    assert kv.lease == winner.registration.lease_id  # the node's own lease: one expiry ends both roles
    assert {n.image.controller for n in nodes} == {ControllerImage(winner.node_id, winner.controller.epoch)}
    assert sum(n.controller.elections for n in nodes) == 1
    assert all(n.epoch == n.image.brokers[n.node_id].epoch for n in nodes)  # broker epoch = create_revision


@SLOW_ON_ETCD
async def test_controller_lease_expiry_elects_another_and_the_deposed_one_cannot_write(cluster_env):
    """KafkaController.processReelect / onControllerResignation, and the fencing of
    KafkaZkClient.wrapRequestWithControllerEpochCheck: the controller's lease expires (a paused node), a
    candidate takes over with a higher epoch, and a write the old controller makes when it resumes
    fails on its epoch compare, leaving the partition as the new controller wrote it."""
    env = cluster_env
    nodes = await start_nodes(env, 3)
    old = await controller_of(env, nodes)
    created = await old.controller.create_topic("t", 1, 3)
    assert created.error is ErrorCode.NONE
    zombie = old.controller.writer
    old_epoch = zombie.epoch
    await old.pause()
    await env.expire_leases()
    rest = [n for n in nodes if n is not old]
    new = await controller_of(env, rest)
    assert new.controller.epoch > old_epoch
    tp = TopicPartition("t", 0)
    await env.settle(lambda: old.node_id not in partitions(new.controller.image, "t")[0].isr)

    key = keys.partition_key("t", 0)
    kv = await new.store.get(key)
    fresh = PartitionImage(PartitionRegistration.decode(kv.value), kv.mod_revision)  # the CAS would pass
    with pytest.raises(Deposed):
        await zombie.write_partition(tp, fresh, lambda reg: reg.changed(leader_epoch=reg.leader_epoch + 5))
    with pytest.raises(Deposed):
        await zombie.create_topic("u", created_info(), [])
    assert (await new.store.get(key)).mod_revision == kv.mod_revision
    assert await new.store.get(keys.topic_key("u")) is None
    answer = await old.controller.create_topic("u", 1, 1)  # the old node's candidacy is not active either
    assert answer.error is ErrorCode.NOT_CONTROLLER


def created_info():
    import uuid

    return keys.TopicInfo(uuid.uuid4(), {})


@SLOW_ON_ETCD
async def test_broker_lease_expiry_moves_its_leaderships_and_takes_it_out_of_the_isrs(cluster_env):
    """KafkaController.onBrokerFailure -> onReplicasBecomeOffline (KRaft: ReplicationControlManager.
    handleBrokerFenced): the partitions the dead broker led get a new leader from the ISR with the leader
    epoch + 1; it leaves every ISR; the others keep their leader and leader epoch."""
    env = cluster_env
    nodes = await start_nodes(env, 3)
    ctrl = await controller_of(env, nodes)
    assert (await ctrl.controller.create_topic("t", 3, 3)).error is ErrorCode.NONE
    await env.settle(lambda: all(len(partitions(n.image, "t")) == 3 for n in nodes))
    before = partitions(ctrl.image, "t")
    victim = next(n for n in nodes if n is not ctrl)
    assert victim.node_id in {r.leader for r in before.values()}  # leaders are spread
    survivor = next(n for n in nodes if n is not ctrl and n is not victim)
    await victim.pause()
    await env.expire_leases()

    def fenced(image):
        regs = partitions(image, "t")
        return len(regs) == 3 and all(victim.node_id not in r.isr for r in regs.values())

    await env.settle(lambda: fenced(survivor.image) and fenced(ctrl.image))
    after = partitions(survivor.image, "t")
    for p, reg in after.items():
        if before[p].leader == victim.node_id:
            assert reg.leader in before[p].isr and reg.leader != victim.node_id
            assert reg.leader_epoch == before[p].leader_epoch + 1
            leader = next(n for n in nodes if n.node_id == reg.leader)
            assert BecomeLeader(TopicPartition("t", p), reg.leader_epoch, reg) in leader.changes
        else:
            assert (reg.leader, reg.leader_epoch) == (before[p].leader, before[p].leader_epoch)
        assert reg.isr == tuple(r for r in before[p].isr if r != victim.node_id)
    assert victim.node_id not in survivor.image.brokers


async def test_losing_the_whole_isr_leaves_the_partition_leaderless_until_an_isr_member_returns(cluster_env):
    """PartitionLeaderElectionAlgorithms.offlinePartitionLeaderElection with unclean election off
    (KIP-106) and KafkaController.onBrokerStartup (KRaft: handleBrokerUnfenced): when the last ISR member
    dies the partition has no leader, its ISR keeps that member, and a live replica that was out of sync
    is not elected (no data lost). When an ISR member registers again it leads, at a new leader epoch;
    an out-of-sync replica coming back changes nothing."""
    env = cluster_env
    one = await Node(env, 1).start()
    two = await Node(env, 2).start(candidate=False)
    three = await Node(env, 3).start(candidate=False)
    env.nodes += [one, two, three]
    await controller_of(env, [one], brokers=3)
    assert (await one.controller.create_topic("t", 1, 3, assignments={0: [2, 3, 1]})).error is ErrorCode.NONE
    await env.settle(lambda: partitions(two.image, "t"))
    part = two.image.partition(TopicPartition("t", 0))
    # the leader drops replica 1 from the ISR (it lagged), by its own CAS
    request = IsrChangeRequest(2, 0, 0, (2, 3))
    error = await write_isr_change(two.store, "t", 0, part.mod_revision, request, two.image.live_brokers(),
                                   two.image.broker_epochs())
    assert error is ErrorCode.NONE
    await two.pause()
    await env.expire_leases()
    await env.settle(lambda: partitions(one.controller.image, "t")[0].leader == 3)
    assert partitions(one.controller.image, "t")[0].leader_epoch == 1
    await three.pause()
    await env.expire_leases()
    await env.settle(lambda: partitions(one.controller.image, "t")[0].leader == NO_LEADER)
    offline = partitions(one.controller.image, "t")[0]
    assert (offline.isr, offline.leader_epoch) == ((3,), 2)  # 1 is live but not in sync: not elected

    back2 = await Node(env, 2).start(candidate=False)  # in no ISR: changes nothing
    env.nodes.append(back2)
    await env.settle(lambda: 2 in one.controller.image.brokers)
    assert partitions(one.controller.image, "t")[0] == offline
    back3 = await Node(env, 3).start(candidate=False)  # a new incarnation, a new broker epoch
    env.nodes.append(back3)
    assert back3.epoch > three.image.brokers[3].epoch
    await env.settle(lambda: partitions(one.controller.image, "t")[0].leader == 3)
    online = partitions(one.controller.image, "t")[0]
    assert (online.isr, online.leader_epoch) == ((3,), 3)
    await env.settle(lambda: back3.image.partition(TopicPartition("t", 0)) is not None
                     and back3.image.partition(TopicPartition("t", 0)).registration.leader == 3)
    assert BecomeLeader(TopicPartition("t", 0), 3, online) in back3.changes


@ON_BOTH
async def test_controlled_shutdown_moves_leaderships_before_the_node_leaves(cluster_env):
    """KafkaController.doControlledShutdown (KRaft: handleBrokerInControlledShutdown): a node marked
    shutting_down loses every leadership and leaves the ISRs while still registered; it waits for that
    in its own metadata, then revokes its lease, which changes no partition any more."""
    env = cluster_env
    nodes = await start_nodes(env, 3)
    ctrl = await controller_of(env, nodes)
    assert (await ctrl.controller.create_topic("t", 3, 3)).error is ErrorCode.NONE
    victim = next(n for n in nodes if n is not ctrl)
    await env.settle(lambda: len(partitions(victim.image, "t")) == 3)
    led = victim.image.led_by(victim.node_id)
    assert led
    assert await victim.registration.shutting_down()

    def moved(image):
        return not image.led_by(victim.node_id) and all(
            victim.node_id not in r.isr for r in partitions(image, "t").values())

    await env.settle(lambda: moved(victim.image))
    assert victim.image.brokers[victim.node_id].info.state is keys.BrokerState.SHUTTING_DOWN
    for tp in led:
        reg = victim.image.partition(tp).registration
        assert BecomeFollower(tp, reg.leader, reg.leader_epoch) in victim.changes
    await env.settle(lambda: moved(ctrl.controller.image))
    settled = {tp: part.mod_revision for tp, part in ctrl.controller.image.partitions()}
    await victim.stop()
    await env.settle(lambda: victim.node_id not in ctrl.controller.image.brokers)
    assert {tp: part.mod_revision for tp, part in ctrl.controller.image.partitions()} == settled


@ON_BOTH
async def test_create_topic_spreads_leaders_and_answers_as_kafka(cluster_env):
    """ReplicationControlManager.createTopic with StripedReplicaPlacer (ZK: AdminZkClient.
    createTopicWithAssignment and KafkaController.onNewPartitionCreation): leaders spread evenly, full
    ISRs, epochs 0; INVALID_REPLICATION_FACTOR, INVALID_REPLICATION_ASSIGNMENT, TOPIC_ALREADY_EXISTS and
    NOT_CONTROLLER as Kafka answers them."""
    env = cluster_env
    nodes = await start_nodes(env, 3)
    ctrl = await controller_of(env, nodes)
    result = await ctrl.controller.create_topic("t", 6, 3, configs={"cleanup.policy": "compact"})
    assert result.error is ErrorCode.NONE
    await env.settle(lambda: all(len(partitions(n.image, "t")) == 6 for n in nodes))
    regs = partitions(nodes[0].image, "t")
    assert collections.Counter(r.leader for r in regs.values()) == {1: 2, 2: 2, 3: 2}
    assert all(sorted(r.isr) == [1, 2, 3] and r.leader_epoch == 0 for r in regs.values())
    topic = nodes[0].image.topics["t"].info
    assert (topic.topic_id, dict(topic.replicas)) == (result.topic_id, dict(result.assignment))
    assert topic.configs == {"cleanup.policy": "compact"}

    assert (await ctrl.controller.create_topic("t", 1, 1)).error is ErrorCode.TOPIC_ALREADY_EXISTS
    assert (await ctrl.controller.create_topic("u", 1, 4)).error is ErrorCode.INVALID_REPLICATION_FACTOR
    bad = await ctrl.controller.create_topic("u", 1, 2, assignments={0: [1, 9]})
    assert bad.error is ErrorCode.INVALID_REPLICATION_ASSIGNMENT
    other = next(n for n in nodes if n is not ctrl)
    assert (await other.controller.create_topic("u", 1, 1)).error is ErrorCode.NOT_CONTROLLER


async def test_a_big_topic_is_written_in_txns_of_at_most_128_operations(cluster_env):
    """etcd's --max-txn-ops (128): the topic key goes first, its partitions follow in several txns, each
    compared against the controller epoch and the topic's creation."""
    store = InterceptingStore(await cluster_env.store())
    node = await Node(cluster_env, 1).start(store)
    cluster_env.nodes.append(node)
    await controller_of(cluster_env, [node])
    store.txn_sizes.clear()
    assert (await node.controller.create_topic("big", 300, 1)).error is ErrorCode.NONE
    assert store.txn_sizes == [MAX_TXN_OPS, MAX_TXN_OPS, 301 - 2 * MAX_TXN_OPS]
    await cluster_env.settle(lambda: len(partitions(node.image, "big")) == 300)


@ON_BOTH
async def test_concurrent_cas_on_one_partition_one_wins_the_other_recomputes(cluster_env):
    """ZooKeeper's conditional setData on the partition state's zkVersion (KafkaZkClient.
    updateLeaderAndIsr, BADVERSION -> retry in KafkaController / ReplicaStateMachine): the leader shrinks
    its ISR by CAS while the controller takes a broker in controlled shutdown out of the same state; the
    controller's CAS fails, it re-reads the partition and writes its change on top of the leader's."""
    env = cluster_env
    shared = await env.store()
    store = InterceptingStore(shared)
    one = await Node(env, 1).start(store)
    two = await Node(env, 2).start(candidate=False)
    three = await Node(env, 3).start(candidate=False)
    env.nodes += [one, two, three]
    await controller_of(env, [one], brokers=3)
    assert (await one.controller.create_topic("t", 1, 3, assignments={0: [1, 2, 3]})).error is ErrorCode.NONE
    await env.settle(lambda: partitions(one.image, "t"))
    read = one.image.partition(TopicPartition("t", 0))
    image = one.image

    async def leader_shrinks():
        request = IsrChangeRequest(1, 0, 0, (1, 2))  # the leader drops 3, which lags
        error = await write_isr_change(shared, "t", 0, read.mod_revision, request, image.live_brokers(),
                                       image.broker_epochs())
        assert error is ErrorCode.NONE

    store.before = leader_shrinks
    assert await two.registration.shutting_down()
    await env.settle(lambda: partitions(one.controller.image, "t")[0].isr == (1,))
    final = partitions(one.controller.image, "t")[0]
    assert (final.leader, final.leader_epoch, final.partition_epoch) == (1, 0, 2)
    assert one.controller.writer.cas_retries == 1
    # the leader's own second try from the old revision is refused, not applied
    stale = IsrChangeRequest(1, 0, 0, (1, 2, 3))
    again = await write_isr_change(shared, "t", 0, read.mod_revision, stale, {1, 3}, {})
    assert again is ErrorCode.INVALID_UPDATE_VERSION


async def test_elect_leaders_preferred_and_unclean(cluster_env):
    """KafkaController.electLeaders / ReplicationControlManager.electLeaders (KIP-460): PREFERRED moves
    leadership back to the first replica once it is in sync again; UNCLEAN elects a live out-of-sync
    replica for a leaderless partition (its ISR becomes that replica alone)."""
    env = cluster_env
    one = await Node(env, 1).start()
    two = await Node(env, 2).start(candidate=False)
    env.nodes += [one, two]
    await controller_of(env, [one], brokers=2)
    assert (await one.controller.create_topic("t", 1, 2, assignments={0: [2, 1]})).error is ErrorCode.NONE
    tp = TopicPartition("t", 0)
    answer = await one.controller.elect_leaders([tp, TopicPartition("nope", 0)], Election.PREFERRED)
    assert answer[tp].error is ErrorCode.ELECTION_NOT_NEEDED
    assert answer[TopicPartition("nope", 0)].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await two.pause()
    await env.expire_leases()
    await env.settle(lambda: partitions(one.controller.image, "t")[0].leader == 1)
    back = await Node(env, 2).start(candidate=False)
    env.nodes.append(back)
    await env.settle(lambda: 2 in one.controller.image.brokers)
    assert (await one.controller.elect_leaders([tp], Election.PREFERRED))[tp].error is \
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE  # 2 is not in the ISR yet
    part = back.image.partition(tp) or one.controller.image.partition(tp)
    rejoin = IsrChangeRequest(1, part.registration.leader_epoch, part.registration.partition_epoch, (1, 2))
    image = one.controller.image
    assert await write_isr_change(one.store, "t", 0, part.mod_revision, rejoin, image.live_brokers(),
                                  image.broker_epochs()) is ErrorCode.NONE
    await env.settle(lambda: partitions(one.controller.image, "t")[0].isr == (1, 2))
    moved = (await one.controller.elect_leaders([tp], Election.PREFERRED))[tp]
    assert moved.error is ErrorCode.NONE and moved.registration.leader == 2
