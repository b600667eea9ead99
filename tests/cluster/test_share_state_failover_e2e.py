"""Share groups in a cluster (issue #28): the share-partition state follows `__share_group_state`'s
leadership. Real etcd, 3 real kcoord nodes with 2 s sessions, confluent-kafka ShareConsumers, faults by
SIGKILL.

The share coordinator (Kafka's ShareCoordinatorService) runs on the leader of the `__share_group_state`
partition that "group:topicId:partition" hashes to; the data partition's leader (SharePartition through
PersisterStateManager) reads and writes the share-partition's state there with the share-state RPCs
(core/src/main/java/kafka/server/share/SharePartition.java, maybeInitialize / writeShareGroupState;
server-common's persister, share-coordinator's ShareCoordinatorShard.readStateAndMaybeUpdateLeaderEpoch /
writeState). The group is picked so that the two are different nodes. A worker process (share_worker.py)
accepts the first records of its poll, holds the rest and is frozen (SIGSTOP); then:
- (a) the share coordinator's node is SIGKILLed: the partition's new leader loads the replicated records,
  and the data leader's next writes (the held records' locks running out) go there;
- (b) the data partition's leader is SIGKILLed: the new leader reads the state from the share coordinator
  at its new leader epoch.
Either way a new consumer gets exactly the records not accepted (the held ones redelivered, delivery
count 2) and the ones produced after the kill; no accepted record comes back, and once it acknowledged
them nothing more is delivered.
"""
from __future__ import annotations

import signal
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

from kcoord.protocol import messages as m  # noqa: E402
from kcoord.protocol.client import KafkaWireClient  # noqa: E402
from kcoord.protocol.errors import ErrorCode  # noqa: E402
from kcoord.share import records as r  # noqa: E402
from tests.broker.share.test_share_consumer_e2e import (  # noqa: E402
    poll_until,
    produce,
    share_consumer,
    start_worker,
    stop_for_good,
)
from tests.cluster.replication_checks import wait_until  # noqa: E402

STATE_PARTITIONS = 3
OVERRIDES = {"share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
             "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": "2000"}
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240),
              pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000, overrides=OVERRIDES)]
TOPIC, ACCEPT, FIRST, LATER = "jobs", 25, 40, 20
SHARE_STATE = "__share_group_state"


class _Server:
    """What start_worker needs of a server: its bootstrap."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap


def _earliest_everywhere(cluster, group: str) -> None:
    """share.auto.offset.reset=earliest for the group on every node (group configs are per node here)."""
    Rq = m.IncrementalAlterConfigsRequest
    request = Rq(resources=[Rq.AlterConfigsResource(resource_type=32, resource_name=group, configs=[
        Rq.AlterConfigsResource.AlterableConfig(name="share.auto.offset.reset", config_operation=0,
                                                value="earliest")])], validate_only=False)
    for node in cluster.nodes.values():
        with KafkaWireClient.connect(node.bootstrap_servers, timeout=10) as client:
            response = client.request(request, 1)
            assert [x.error_code for x in response.responses] == [ErrorCode.NONE]


def _setup(cluster) -> tuple[str, int, int]:
    """The topic (RF 3), and a group whose share coordinator is not the data partition's leader:
    (group, data leader, share coordinator node)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
    finally:
        admin.close()
    leader = cluster.wait_leader(TOPIC, 0, timeout=15)
    cluster.wait_isr(TOPIC, 0, 3)
    [t] = cluster.metadata(topics=[TOPIC]).topics
    topic_id = uuid.UUID(bytes=t.topic_id.bytes) if not isinstance(t.topic_id, uuid.UUID) else t.topic_id
    # a first share consumer creates __share_group_state (the persister asks for it on first need)
    warmup = share_consumer(cluster.bootstrap_servers, "warmup", TOPIC)
    try:
        wait_until(lambda: all(_leader_of_or_zero(cluster, SHARE_STATE, p) > 0 for p in range(STATE_PARTITIONS))
                   or (warmup.poll(0.2), False)[1], 60, "__share_group_state led")
    finally:
        warmup.close()
    for i in range(50):
        group = f"workers-{i}"
        coordinator = cluster.leader_of(SHARE_STATE, r.share_state_partition(group, topic_id, 0, STATE_PARTITIONS))
        if coordinator != leader:
            return group, leader, coordinator
    pytest.fail("no group whose share coordinator is off the data leader")


def _leader_of_or_zero(cluster, topic: str, partition: int) -> int:
    try:
        return cluster.leader_of(topic, partition)
    except (KeyError, OSError):  # not created yet, or a node gone: asked again
        return 0


def _describe(cluster, group: str, down: int) -> tuple[int, int]:
    """(start offset, lag) of jobs-0 from DescribeShareGroupOffsets v1 at the group's coordinator
    (GroupCoordinatorService.describeShareGroupOffsets, which asks the persister's readSummary)."""
    F, D = m.FindCoordinatorRequest, m.DescribeShareGroupOffsetsRequest
    via = next(node for node_id, node in cluster.nodes.items() if node_id != down)
    with KafkaWireClient.connect(via.bootstrap_servers, timeout=10) as client:
        [c] = client.request(F(key_type=0, coordinator_keys=[group]), 4).coordinators
    if c.error_code != ErrorCode.NONE:
        return -1, -1
    with KafkaWireClient.connect(f"{c.host}:{c.port}", timeout=10) as client:
        resp = client.request(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
            D.DescribeShareGroupOffsetsRequestTopic(
                topic_name=TOPIC, partitions=[0])])]), 1)
    [p] = [p for g in resp.groups for t in g.topics for p in t.partitions]
    return p.start_offset, p.lag


@pytest.mark.parametrize("victim", ["share_coordinator", "data_leader"])
def test_share_state_survives_sigkill(kafka_cluster, victim):
    group, leader, coordinator = _setup(kafka_cluster)
    _earliest_everywhere(kafka_cluster, group)
    produce(kafka_cluster.bootstrap_servers, TOPIC, FIRST)
    worker, report = start_worker(_Server(kafka_cluster.bootstrap_servers), group, TOPIC, accept=ACCEPT)
    worker.send_signal(signal.SIGSTOP)  # holds its acquired records without acknowledging or leaving
    try:
        assert report["accepted"] == list(range(ACCEPT))
        assert [o for o, _count in report["held"]] == list(range(ACCEPT, FIRST))
        killed = coordinator if victim == "share_coordinator" else leader
        kafka_cluster.kill(killed)
        if victim == "data_leader":
            kafka_cluster.wait_leader(TOPIC, 0, not_on=killed)
        produce(kafka_cluster.bootstrap_servers, TOPIC, LATER, start=FIRST)
        consumer = share_consumer(kafka_cluster.bootstrap_servers, group, TOPIC)
        try:
            expected = set(range(ACCEPT, FIRST + LATER))
            got = poll_until(consumer, lambda got: {x.offset() for x in got} >= expected, timeout_s=90)
            offsets = [x.offset() for x in got]
            assert set(offsets) == expected, f"missing {sorted(expected - set(offsets))}, extra " \
                                             f"{sorted(set(offsets) - expected)}"
            assert not set(offsets) & set(range(ACCEPT)), "an accepted record was delivered again"
            if victim == "share_coordinator":  # the data leader saw the held records' locks run out
                assert all(x.delivery_count() >= 2 for x in got if x.offset() < FIRST)
            time.sleep(1)  # the implicit acknowledgement of the last poll goes with the next one
            again = poll_until(consumer, lambda got: False, timeout_s=4)
            assert not again, f"acknowledged records delivered again: {[x.offset() for x in again]}"
            # the share coordinator's summary (ReadShareGroupStateSummary) behind DescribeShareGroupOffsets
            described = wait_until(lambda: (d := _describe(kafka_cluster, group, killed))[0] == FIRST + LATER and d,
                                   30, "the start offset past every record")
            assert described == (FIRST + LATER, 0)
        finally:
            consumer.close()
    finally:
        stop_for_good(worker)


def _one(response):
    [p] = [p for t in response.results for p in t.partitions]
    return p


def test_share_state_rpcs_at_the_wire(kafka_cluster):
    """The share-state RPCs between nodes, at the wire: FindCoordinator key type 2 names the leader of the
    key's __share_group_state partition (KafkaApis.getCoordinator, ShareCoordinatorService.partitionFor);
    another node answers NOT_COORDINATOR; ShareCoordinatorShard's fencing (initializeState: a state epoch not
    newer is FENCED_STATE_EPOCH; readStateAndMaybeUpdateLeaderEpoch records a newer leader epoch, after which
    writeState / readState at an older one are FENCED_LEADER_EPOCH); deleteState leaves StartOffset -1."""
    group, _leader, coordinator = _setup(kafka_cluster)
    [t] = kafka_cluster.metadata(topics=[TOPIC]).topics
    other = next(n for n in kafka_cluster.nodes if n != coordinator)
    key = r.coordinator_key(group, t.topic_id, 0)
    F = m.FindCoordinatorRequest
    with KafkaWireClient.connect(kafka_cluster.nodes[other].bootstrap_servers, timeout=10) as client:
        found = client.request(F(key_type=2, coordinator_keys=[key]), 6)
        assert [(c.error_code, c.node_id) for c in found.coordinators] == [(ErrorCode.NONE, coordinator)]
        R = m.ReadShareGroupStateRequest
        read = R(group_id=group, topics=[R.ReadStateData(topic_id=t.topic_id, partitions=[
            R.PartitionData(partition=0, leader_epoch=5)])])
        assert _one(client.request(read, 0)).error_code == ErrorCode.NOT_COORDINATOR
    Ini, W, D, S = (m.InitializeShareGroupStateRequest, m.WriteShareGroupStateRequest, m.DeleteShareGroupStateRequest,
                    m.ReadShareGroupStateSummaryRequest)

    def write(leader_epoch):
        return W(group_id=group, topics=[W.WriteStateData(topic_id=t.topic_id, partitions=[W.PartitionData(
            partition=0, state_epoch=0, leader_epoch=leader_epoch, start_offset=3, delivery_complete_count=0,
            state_batches=[W.StateBatch(first_offset=3, last_offset=4, delivery_state=2, delivery_count=1)])])])

    initialize = Ini(group_id=group, topics=[Ini.InitializeStateData(topic_id=t.topic_id, partitions=[
        Ini.PartitionData(partition=0, state_epoch=0, start_offset=0)])])
    summary = S(group_id=group, topics=[S.ReadStateSummaryData(topic_id=t.topic_id, partitions=[
        S.PartitionData(partition=0, leader_epoch=0)])])
    with KafkaWireClient.connect(kafka_cluster.nodes[coordinator].bootstrap_servers, timeout=10) as client:
        assert _one(client.request(read, 0)).start_offset == -1  # no state yet
        assert _one(client.request(initialize, 0)).error_code == ErrorCode.NONE
        assert _one(client.request(initialize, 0)).error_code == ErrorCode.FENCED_STATE_EPOCH
        got = _one(client.request(read, 0))
        assert (got.error_code, got.start_offset, got.state_epoch) == (ErrorCode.NONE, 0, 0)
        assert _one(client.request(write(4), 1)).error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert _one(client.request(write(5), 1)).error_code == ErrorCode.NONE
        got = _one(client.request(read, 0))
        assert (got.start_offset, [(b.first_offset, b.last_offset, b.delivery_state) for b in got.state_batches]) \
            == (3, [(3, 4, 2)])
        got = _one(client.request(summary, 1))
        assert (got.start_offset, got.leader_epoch, got.delivery_complete_count) == (3, 5, 0)
        deleted = client.request(D(group_id=group, topics=[D.DeleteStateData(topic_id=t.topic_id, partitions=[
            D.PartitionData(partition=0)])]), 0)
        assert _one(deleted).error_code == ErrorCode.NONE
        assert _one(client.request(read, 0)).start_offset == -1
