"""The cluster's admin surface end to end (issue 26): 3 nodes on a real etcd, kafka-python's admin client
and the raw wire. ElectLeaders after a reorder leaves a non-preferred leader; reassignments (a removal
that completes at once and moves the leader; an addition whose progress ListPartitionReassignments shows,
then cancelled); DescribeTopicPartitions paging; DeleteTopics; SIGTERM moving a node's leaderships before
it leaves while a producer writes.

Replication's data plane is wired into the node by another change: until then a new replica never joins
the ISR, so a reassignment that adds one stays in progress here (its completion is covered on LocalStore
by tests/cluster/test_controller_admin.py)."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tests.cluster.replication_checks import wait_until as _wait
from tests.cluster.test_cluster_e2e import _partitions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120),
              pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000)]


def _create(admin, name: str, assignments: dict[int, list[int]]):
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic(name, replica_assignments=assignments)])


def test_elect_leaders_moves_the_leader_to_the_preferred_replica(kafka_cluster, admin):
    """A reorder [1, 2, 3] -> [2, 1, 3] completes at once and keeps leader 1, which is then not the
    preferred replica; a PREFERRED ElectLeaders (ReplicationControlManager.electLeader) moves it to 2 with
    a new leader epoch; asked again, the election is not needed."""
    from kafka import TopicPartition
    from kafka.protocol.admin.topics import ElectionType

    _create(admin, "elect", {0: [1, 2, 3]})
    before = _wait(lambda: (p := _partitions(kafka_cluster, "elect")) and p, 10, "the topic")[0]
    assert before.leader_id == 1
    assert admin.alter_partition_reassignments({TopicPartition("elect", 0): [2, 1, 3]}) == \
        {TopicPartition("elect", 0): None}
    _wait(lambda: _partitions(kafka_cluster, "elect")[0].replica_nodes == [2, 1, 3], 10, "the reorder")
    assert _partitions(kafka_cluster, "elect")[0].leader_id == 1
    response = admin.elect_leaders(ElectionType.PREFERRED, {"elect": [0]})
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in response.replica_election_results] == [("elect", [(0, 0)])]
    after = _wait(lambda: (p := _partitions(kafka_cluster, "elect")[0]).leader_id == 2 and p, 10, "leader 2")
    assert after.leader_epoch == before.leader_epoch + 1
    again = admin.elect_leaders(ElectionType.PREFERRED, {"elect": [0], "nope": [0]}, raise_errors=False)
    errors = {(r.topic, p.partition_id): p.error_code for r in again.replica_election_results for p in r.partition_result}
    assert errors == {("elect", 0): 84, ("nope", 0): 3}  # ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION


def test_reassignments_remove_add_list_and_cancel(kafka_cluster, admin):
    """changePartitionReassignment / listPartitionReassignments through kafka-python: a removal completes
    at once; an addition completes once the new replica has caught up and joined the ISR (the leader's
    ISR write, PartitionChangeBuilder's completeReassignmentIfNeeded); cancelling when nothing is in
    progress is NO_REASSIGNMENT_IN_PROGRESS. (Cancelling one in progress: test_controller_admin.)"""
    from kafka import TopicPartition
    from kafka.errors import NoReassignmentInProgressError

    _create(admin, "moved", {0: [1, 2, 3]})
    _create(admin, "added", {0: [1, 2]})
    _wait(lambda: _partitions(kafka_cluster, "moved") and _partitions(kafka_cluster, "added"), 10, "the topics")
    p0, p1 = TopicPartition("moved", 0), TopicPartition("added", 0)
    # [1, 2, 3] -> [2, 3]: the targets are in sync, so it completes at once and the leader leaves 1
    assert admin.alter_partition_reassignments({p0: [2, 3]}) == {p0: None}
    done = _wait(lambda: (p := _partitions(kafka_cluster, "moved")[0]).replica_nodes == [2, 3] and p, 10, "p0 moved")
    assert done.leader_id == 2 and sorted(done.isr_nodes) == [2, 3]
    # [1, 2] -> [2, 3]: RS = [2, 3, 1], adding [3], removing [1] until 3 has caught up and is in the ISR
    assert admin.alter_partition_reassignments({p1: [2, 3]}) == {p1: None}
    moved = _wait(lambda: (p := _partitions(kafka_cluster, "added")[0]).replica_nodes == [2, 3] and p, 30,
                  "p1 moved to [2, 3]")
    assert sorted(moved.isr_nodes) == [2, 3] and moved.leader_id in (2, 3)
    assert admin.list_partition_reassignments() == {}
    assert admin.alter_partition_reassignments({p1: None}) == {p1: NoReassignmentInProgressError}


def test_describe_topic_partitions_pages_with_a_cursor(kafka_cluster, admin):
    _create(admin, "paged", {i: [1 + i % 3, 1 + (i + 1) % 3] for i in range(5)})
    _wait(lambda: len(_partitions(kafka_cluster, "paged")) == 5, 10, "the topic")
    first = admin.describe_topic_partitions(["paged", "unknown-topic"], response_partition_limit=3)
    [topic] = first["topics"]
    assert [p["partition_index"] for p in topic["partitions"]] == [0, 1, 2]
    assert topic["partitions"][1]["replica_nodes"] == [2, 3]
    assert first["next_cursor"] == {"topic_name": "paged", "partition_index": 3}
    rest = admin.describe_topic_partitions(["paged", "unknown-topic"], response_partition_limit=3,
                                           cursor=first["next_cursor"])
    assert [(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]]) for t in rest["topics"]] == \
        [("paged", 0, [3, 4]), ("unknown-topic", 3, [])]
    assert rest["next_cursor"] is None


def test_delete_topics_in_cluster_mode(kafka_cluster, admin):
    _create(admin, "doomed", {0: [1, 2], 1: [2, 3]})
    _wait(lambda: len(_partitions(kafka_cluster, "doomed")) == 2, 10, "the topic")
    admin.delete_topics(["doomed"])
    for node_id in (1, 2, 3):
        _wait(lambda n=node_id: kafka_cluster.metadata(via=n, topics=["doomed"]).topics[0].error_code == 3, 10,
              f"node {node_id} no longer knows the topic")


def test_sigterm_moves_leaderships_before_the_node_leaves_while_a_producer_writes(kafka_cluster, admin):
    from kafka import KafkaProducer

    _create(admin, "drained", {i: [1 + i % 3, 1 + (i + 1) % 3, 1 + (i + 2) % 3] for i in range(6)})
    _wait(lambda: len(_partitions(kafka_cluster, "drained")) == 6, 10, "the topic")
    victim = 2
    assert any(p.leader_id == victim for p in _partitions(kafka_cluster, "drained").values())
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers, acks=1, retries=20,
                             retry_backoff_ms=100, request_timeout_ms=5000)
    failures: list[BaseException] = []
    stop = threading.Event()

    def produce():
        while not stop.is_set():
            futures = [producer.send("drained", b"x", partition=i) for i in range(6)]
            for f in futures:
                try:
                    f.get(timeout=15)
                except Exception as exc:  # noqa: BLE001 - the history is checked below
                    failures.append(exc)
            time.sleep(0.05)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        time.sleep(0.5)
        os.kill(kafka_cluster.nodes[victim].pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while kafka_cluster.nodes[victim].running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not kafka_cluster.nodes[victim].running
        # the node's own record: its leaderships had moved before it revoked its lease (cluster/node.py)
        text = kafka_cluster.nodes[victim].log_path.read_text()
        assert f"node {victim} leads nothing any more" in text, text[-2000:]
        kafka_cluster.wait_registered({1, 3}, timeout=10, via=1)
        leaders = {p.leader_id for p in _partitions(kafka_cluster, "drained").values()}
        assert victim not in leaders and -1 not in leaders
    finally:
        stop.set()
        writer.join(timeout=30)
        producer.close()
    assert all(getattr(exc, "retriable", False) for exc in failures), failures
