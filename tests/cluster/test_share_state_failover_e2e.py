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
    leader = wait_until(lambda: (n := cluster.leader_of(TOPIC, 0)) > 0 and n, 15, "a leader")
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
            wait_until(lambda: _leader_of_or_zero(kafka_cluster, TOPIC, 0) not in (0, killed), 30, "a new leader")
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
        finally:
            consumer.close()
    finally:
        stop_for_good(worker)
