"""ElectLeaders and reassignments while clients keep producing and consuming (issue #26's acceptance):
3 real nodes on a real etcd, an idempotent acks=all confluent-kafka producer and a kafka-python consumer
group committing, on a topic of replication factor 2, while a preferred election moves a leader, a
reassignment replaces a partition's leader by another node, and one adds a third replica (a new replica
joins the ISR once caught up, then the reassignment completes: ReplicationControlManager.
alterPartitionReassignment / PartitionChangeBuilder's completeReassignmentIfNeeded).

Checker: every acknowledged record read back once at its acknowledged offset, every one of them consumed by
the group, the group's committed offsets reach the end offsets, replicas byte-identical to the HW."""
from __future__ import annotations

import threading

import pytest

from tests.cluster.replication_checks import (
    History,
    Producer,
    check_exactly_once,
    check_identical_replicas,
    read_all,
    wait_until,
)
from tests.cluster.test_cluster_e2e import _partitions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180),
              pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000)]

TOPIC = "moving"


class GroupConsumer(threading.Thread):
    """A kafka-python group member consuming TOPIC and committing after each poll."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="group consumer", daemon=True)
        self.bootstrap = bootstrap
        self.values: set[str] = set()
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from kafka import KafkaConsumer

        try:
            consumer = KafkaConsumer(TOPIC, bootstrap_servers=self.bootstrap, group_id="movers",
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     metadata_max_age_ms=1000, request_timeout_ms=20_000)
            consumer.partitions_for_topic(TOPIC)  # before the first join: see tests/test_example_app.py's App
            try:
                while not self.stopping.is_set():
                    batches = consumer.poll(timeout_ms=200)
                    for records in batches.values():
                        self.values.update(r.value.decode() for r in records)
                    if batches:
                        consumer.commit()
            finally:
                consumer.close()
        except BaseException as exc:  # reported by the test
            self.error = exc


def _committed(bootstrap: str, partitions: int) -> dict[int, int]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return {tp.partition: meta.offset for tp, meta in admin.list_group_offsets("movers")["movers"].items()
                if tp.topic == TOPIC and tp.partition < partitions}
    finally:
        admin.close()


def test_elections_and_reassignments_under_a_producer_and_a_group(kafka_cluster):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.protocol.admin.topics import ElectionType

    cluster, history = kafka_cluster, History()
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
    admin.create_topics([NewTopic(TOPIC, replica_assignments={0: [1, 2], 1: [2, 3], 2: [3, 1]},
                                  topic_configs={"min.insync.replicas": "2"})])
    for p in range(3):
        cluster.wait_isr(TOPIC, p, 2)
    producer = Producer("confluent", cluster.bootstrap_servers, TOPIC, history)
    group = GroupConsumer(cluster.bootstrap_servers)
    producer.start()
    group.start()
    try:
        wait_until(lambda: history.of("confluent", "ack") and group.values, 60, "the first write and read")

        # p0: reorder to [2, 1], then a preferred election moves the leader 1 -> 2
        assert admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [2, 1]}) == \
            {TopicPartition(TOPIC, 0): None}
        wait_until(lambda: _partitions(cluster, TOPIC)[0].replica_nodes == [2, 1], 20, "p0 reordered")
        admin.elect_leaders(ElectionType.PREFERRED, {TOPIC: [0]})
        # p1: [2, 3] -> [3, 1]: node 1 added, the leader 2 removed once 1 is in the ISR
        assert admin.alter_partition_reassignments({TopicPartition(TOPIC, 1): [3, 1]}) == \
            {TopicPartition(TOPIC, 1): None}
        # p2: [3, 1] -> [3, 1, 2], an addition: node 2 catches up, joins the ISR, the reassignment completes
        assert admin.alter_partition_reassignments({TopicPartition(TOPIC, 2): [3, 1, 2]}) == \
            {TopicPartition(TOPIC, 2): None}
        wait_until(lambda: (parts := _partitions(cluster, TOPIC))[0].leader_id == 2
                   and parts[1].replica_nodes == [3, 1] and sorted(parts[1].isr_nodes) == [1, 3]
                   and parts[2].replica_nodes == [3, 1, 2] and sorted(parts[2].isr_nodes) == [1, 2, 3]
                   and not admin.list_partition_reassignments(), 60, "the moves")
        moved = history.add("checker", "moved", note="election and reassignments done")
        wait_until(lambda: any(e.t > moved.t for e in history.of("confluent", "ack")), 30,
                   "an acknowledged write after the moves")
    finally:
        producer.stop()
        admin.close()

    problems = [f"producer crashed: {producer.error!r}"] if producer.error is not None else []
    records, ends = read_all(cluster.bootstrap_servers, TOPIC, 3)
    problems += check_exactly_once(history, "confluent", records)
    acked = {e.value for e in history.of("confluent", "ack")}
    try:
        wait_until(lambda: acked <= group.values and _committed(cluster.bootstrap_servers, 3) == ends, 60,
                   "the group consuming and committing every acknowledged record")
    except AssertionError as exc:
        problems.append(f"{exc}: {len(acked - group.values)} acknowledged not consumed, committed "
                        f"{_committed(cluster.bootstrap_servers, 3)}, ends {ends}")
    finally:
        group.stopping.set()
        group.join(30)
    problems += [f"consumer crashed: {group.error!r}"] if group.error is not None else []
    for p in range(3):
        holders = {n: cluster.data_dir(n) for n in _partitions(cluster, TOPIC)[p].replica_nodes}
        problems += check_identical_replicas(holders, TOPIC, p, ends[p])
    if problems:
        pytest.fail("\n".join(problems[:50]) + "\n--- history ---\n" + history.text(problems))
