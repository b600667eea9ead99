"""The controller's admin operations on LocalStore: reassignment phases (start, completion once the targets
are in the ISR, observed from the leader's own ISR write; cancel), DeleteTopics and CreatePartitions, with
the errors of Kafka's ReplicationControlManager (metadata/src/main/java/org/apache/kafka/controller/)."""
from __future__ import annotations

from kcoord.cluster import keys
from kcoord.cluster.isr import write_isr_change
from kcoord.cluster.metadata_image import StopReplica, TopicPartition
from kcoord.cluster.partition_change import IsrChangeRequest
from kcoord.metadata.store import Put, modified_at
from kcoord.protocol.errors import ErrorCode
from tests.cluster.conftest import start_nodes
from tests.cluster.test_controller import controller_of, partitions

TP = TopicPartition("t", 0)


async def _three(env):
    nodes = await start_nodes(env, 3)
    ctl = await controller_of(env, nodes)
    assert (await ctl.controller.create_topic("t", 1, 2, assignments={0: [1, 2]})).error is ErrorCode.NONE
    return nodes, ctl


async def test_reassignment_runs_kafkas_phases_and_completes_when_the_target_is_in_sync(cluster_env):
    """changePartitionReassignment: RS = TRS + removing, adding / removing recorded; the controller completes
    it on the ISR write that brings the last target in (maybeCompleteReassignment), dropping replica 1 and
    moving the leadership off it."""
    env = cluster_env
    nodes, ctl = await _three(env)
    c = ctl.controller
    started = (await c.alter_partition_reassignments([(TP, [2, 3])]))[TP]
    assert started.error is ErrorCode.NONE
    reg = partitions(c.image, "t")[0]
    assert (reg.replicas, reg.adding_replicas, reg.removing_replicas, reg.leader) == ((2, 3, 1), (3,), (1,), 1)
    assert c.list_partition_reassignments(None) == [(TP, reg)]
    assert c.list_partition_reassignments([TopicPartition("t", 9), TopicPartition("nope", 0)]) == []
    await env.settle(lambda: any(not isinstance(ch, StopReplica) and ch.tp == TP for ch in nodes[2].changes))
    # the leader (1) adds the caught-up replica 3 to the ISR, as the replication layer does
    part = c.image.partition(TP)
    request = IsrChangeRequest(1, reg.leader_epoch, reg.partition_epoch, (1, 2, 3))
    image = c.image
    # KRaft completes the reassignment inside that very ISR change and tells the leader, who is dropped,
    # NEW_LEADER_ELECTED (ReplicationControlManager.alterPartition)
    assert await write_isr_change(ctl.store, "t", 0, part.mod_revision, request, image.live_brokers(),
                                  image.broker_epochs()) is ErrorCode.NEW_LEADER_ELECTED
    await env.settle(lambda: not partitions(c.image, "t")[0].is_reassigning)
    done = partitions(c.image, "t")[0]
    assert (done.replicas, done.isr, done.leader) == ((2, 3), (2, 3), 2)
    assert done.leader_epoch == reg.leader_epoch + 1
    assert c.list_partition_reassignments(None) == []
    await env.settle(lambda: StopReplica(TP) in nodes[0].changes)


async def test_the_controller_completes_a_reassignment_on_an_isr_write_it_observes(cluster_env):
    """An ISR expansion written without completing (a writer that does not run the change builder) is
    completed by the controller's reaction to the batch it observes."""
    env = cluster_env
    _nodes, ctl = await _three(env)
    c = ctl.controller
    assert (await c.alter_partition_reassignments([(TP, [2, 3])]))[TP].error is ErrorCode.NONE
    part = c.image.partition(TP)
    reg = part.registration
    expanded = reg.changed(isr=(1, 2, 3), partition_epoch=reg.partition_epoch + 1)
    result = await ctl.store.txn([modified_at(keys.partition_key("t", 0), part.mod_revision)],
                                 [Put(keys.partition_key("t", 0), expanded.encode())])
    assert result.succeeded
    await env.settle(lambda: not partitions(c.image, "t")[0].is_reassigning)
    done = partitions(c.image, "t")[0]
    assert (done.replicas, done.isr, done.leader) == ((2, 3), (2, 3), 2)


async def test_cancel_reverts_and_errors_are_kafkas(cluster_env):
    """cancelPartitionReassignment (PartitionReassignmentRevert) and alterPartitionReassignment's errors."""
    env = cluster_env
    _nodes, ctl = await _three(env)
    c = ctl.controller
    answer = await c.alter_partition_reassignments([
        (TP, None), (TopicPartition("nope", 0), [1]), (TopicPartition("t", 5), [1]),
        (TopicPartition("t", 0), [1, 1]), (TopicPartition("t", 0), [9])])
    assert answer[TP].error is ErrorCode.INVALID_REPLICATION_ASSIGNMENT  # the last one named wins the key
    assert answer[TopicPartition("nope", 0)].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert answer[TopicPartition("t", 5)].error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (await c.alter_partition_reassignments([(TP, None)]))[TP].error is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    refused = await c.alter_partition_reassignments([(TP, [3])], allow_replication_factor_change=False)
    assert refused[TP].error is ErrorCode.INVALID_REPLICATION_FACTOR
    assert (await c.alter_partition_reassignments([(TP, [2, 3])]))[TP].error is ErrorCode.NONE
    assert (await c.alter_partition_reassignments([(TP, None)]))[TP].error is ErrorCode.NONE
    reg = partitions(c.image, "t")[0]
    # PartitionReassignmentRevert keeps the replicas that were not being added, in the reassigning order
    assert (reg.replicas, reg.isr, reg.adding_replicas, reg.removing_replicas) == ((2, 1), (1, 2), (), ())
    assert reg.leader == 1


async def test_a_reorder_completes_at_once_and_moves_the_preferred_leader(cluster_env):
    env = cluster_env
    _nodes, ctl = await _three(env)
    c = ctl.controller
    assert (await c.alter_partition_reassignments([(TP, [2, 1])]))[TP].error is ErrorCode.NONE
    reg = partitions(c.image, "t")[0]
    assert (reg.replicas, reg.is_reassigning, reg.leader) == ((2, 1), False, 1)


async def test_delete_topics_removes_every_key_and_replicas_stop(cluster_env):
    """ReplicationControlManager.deleteTopics; the replicas' diff is StopReplica."""
    env = cluster_env
    nodes, ctl = await _three(env)
    c = ctl.controller
    assert await c.delete_topics(["t", "nope"]) == {"t": (ErrorCode.NONE, None),
                                                    "nope": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)}
    assert "t" not in c.image.topics
    assert (await ctl.store.range("topics/")).kvs == ()
    await env.settle(lambda: StopReplica(TP) in nodes[0].changes and StopReplica(TP) in nodes[1].changes)
    assert (await c.create_topic("t", 1, 1)).error is ErrorCode.NONE  # the name is free again


async def test_create_partitions_places_with_the_topic_replication_factor(cluster_env):
    """ReplicationControlManager.createPartitions: its errors and messages, then two more partitions."""
    env = cluster_env
    _nodes, ctl = await _three(env)
    c = ctl.controller
    assert await c.create_partitions("nope", 2) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                    "This server does not host this topic-partition.")
    assert await c.create_partitions("t", 1) == (ErrorCode.INVALID_PARTITIONS, "Topic already has 1 partition(s).")
    assert (await c.create_partitions("t", 0))[0] is ErrorCode.INVALID_PARTITIONS
    assert (await c.create_partitions("t", 3, [[1, 2]]))[0] is ErrorCode.INVALID_REPLICATION_ASSIGNMENT
    assert (await c.create_partitions("t", 2, [[1]]))[0] is ErrorCode.INVALID_REPLICATION_ASSIGNMENT
    assert await c.create_partitions("t", 2, [[3, 1]], validate_only=True) == (ErrorCode.NONE, None)
    assert len(partitions(c.image, "t")) == 1
    assert await c.create_partitions("t", 4, [[3, 1], [2, 3], [1, 3]]) == (ErrorCode.NONE, None)
    parts = partitions(c.image, "t")
    assert {p: (r.replicas, r.leader) for p, r in parts.items()} == {
        0: ((1, 2), 1), 1: ((3, 1), 3), 2: ((2, 3), 2), 3: ((1, 3), 1)}
    assert c.image.topics["t"].info.replicas[3] == (1, 3)
    assert (await c.create_partitions("t", 6))[0] is ErrorCode.NONE  # placed by the controller
    assert all(len(r.replicas) == 2 for r in partitions(c.image, "t").values())


async def test_a_broker_registered_a_moment_ago_can_be_named_before_the_controllers_watch_brings_it(cluster_env):
    """A registration the controller's watch has not delivered yet (a cluster just started: every node's
    Metadata lists the broker, the controller's image does not) is read from the store at the request, as
    the ZooKeeper-era AdminZkClient.createTopic read /brokers/ids: a manual assignment naming it is accepted,
    and so are CreatePartitions and a reassignment onto it (a CI run refused the first, 'broker 1 ... is not
    registered'). An id nobody registered is still INVALID_REPLICATION_ASSIGNMENT."""
    env = cluster_env
    nodes = await start_nodes(env, 1)
    c = (await controller_of(env, nodes)).controller
    store = env.local
    for broker in (2, 3):
        await store.txn([], [Put(keys.broker_key(broker), keys.BrokerInfo(broker).encode())])
    assert not {2, 3} & set(c.image.brokers)   # the watch has not run: nothing above gave it the loop
    created = await c.create_topic("late", -1, -1, assignments={0: [2]})
    assert (created.error, created.assignment) == (ErrorCode.NONE, {0: (2,)})
    assert await c.create_partitions("late", 2, [[3]]) == (ErrorCode.NONE, None)
    moved = await c.alter_partition_reassignments([(TopicPartition("late", 0), [3])])
    assert moved[TopicPartition("late", 0)].error is ErrorCode.NONE
    refused = await c.create_topic("ghost", -1, -1, assignments={0: [9]})
    assert refused.error is ErrorCode.INVALID_REPLICATION_ASSIGNMENT
