"""Leader epochs over TCP: the epoch a partition's batches carry is the one Metadata and ListOffsets report;
it rises when the node leads the partition again (each start, as a single-node KRaft broker's partitions
lose and regain their leader), and OffsetForLeaderEpoch (23) answers from the partition's
leader-epoch-checkpoint as Kafka's Partition.lastOffsetForLeaderEpoch / LeaderEpochFileCache.endOffsetFor
(core/src/main/scala/kafka/cluster/Partition.scala). A kafka-python group consumer validates its position
with it after the restart (KIP-320) and goes on where it was.
"""
from __future__ import annotations

import re
import time
import urllib.request

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import iter_batches
from tests.support.raw_kafka import RawKafka


def produce(server, topic: str, values) -> None:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    for v in values:
        producer.send(topic, v, partition=0).get(timeout=10)
    producer.close()


def metadata_epoch(server, topic: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    (desc,) = admin.describe_topics([topic])
    admin.close()
    return desc["partitions"][0]["leader_epoch"]


def end_offsets(server, topic: str, asks):
    """[(partition, current_leader_epoch, leader_epoch)] -> [(error, epoch, end offset)] at v4."""
    R = m.OffsetForLeaderEpochRequest
    T = R.OffsetForLeaderTopic
    with RawKafka(server.port) as c:
        resp = c.request(23, 4, R(replica_id=-1, topics=[T(topic=topic, partitions=[
            T.OffsetForLeaderPartition(partition=p, current_leader_epoch=cur, leader_epoch=e) for p, cur, e in asks])]))
    return [(p.error_code, p.leader_epoch, p.end_offset) for p in resp.topics[0].partitions]


def stamped_epochs(server, topic: str) -> list[int]:
    return [h.partition_leader_epoch for path in sorted((server.data_dir / f"{topic}-0").glob("*.log"))
            for _, h, _ in iter_batches(path.read_bytes())]


def test_epochs_rise_with_leadership_and_answer_offset_for_leader_epoch(kcoord_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap)
    admin.create_topics([NewTopic("epochs", 1, 1)])
    admin.close()
    produce(kcoord_server, "epochs", [b"a", b"b", b"c"])
    assert metadata_epoch(kcoord_server, "epochs") == 0
    assert end_offsets(kcoord_server, "epochs", [(0, 0, 0)]) == [(ErrorCode.NONE, 0, 3)]

    kcoord_server.restart()
    assert metadata_epoch(kcoord_server, "epochs") == 1
    produce(kcoord_server, "epochs", [b"d", b"e"])
    assert stamped_epochs(kcoord_server, "epochs") == [0, 0, 0, 1, 1]
    assert (kcoord_server.data_dir / "epochs-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 3\n"
    assert end_offsets(kcoord_server, "epochs", [(0, 1, 0), (0, 1, 1), (0, -1, 0), (0, 0, 0), (0, 7, 0), (3, -1, 0)]) == [
        (ErrorCode.NONE, 0, 3),                 # epoch 0 ended where epoch 1 began
        (ErrorCode.NONE, 1, 5),                 # the current epoch ends at the log end
        (ErrorCode.NONE, 0, 3),                 # no fencing asked
        (ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
        (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    R = m.ListOffsetsRequest
    with RawKafka(kcoord_server.port) as c:
        resp = c.request(2, 7, R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(name="epochs", partitions=[
            R.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=t)
            for t in (-2, -1)])]))
    assert [(p.offset, p.leader_epoch) for p in resp.topics[0].partitions] == [(0, 0), (5, 1)]


def test_running_consumer_validates_its_position_across_a_restart(kcoord_server_factory):
    """kafka-python sees the new epoch in its metadata, asks OffsetForLeaderEpoch for its position's epoch
    (Fetcher.maybe_validate_positions), finds no truncation and goes on where it was."""
    server = kcoord_server_factory({"metrics.port": "0"})
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic("resume", 1, 1)])
    admin.close()
    produce(server, "resume", [b"m%d" % i for i in range(3)])
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest",
                             metadata_max_age_ms=300)
    consumer.assign([TopicPartition("resume", 0)])

    def poll(n: int) -> list:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += records
        return got

    def validations() -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as page:
            found = re.search(r'kcoord_requests_total\{api="OffsetForLeaderEpoch",error_code="0"\} (\d+)',
                              page.read().decode())
        return int(found.group(1)) if found else 0

    try:
        assert [(r.offset, r.leader_epoch) for r in poll(3)] == [(0, 0), (1, 0), (2, 0)]
        server.restart()
        # Nothing new to fetch: the consumer's next metadata shows epoch 1 above its position's 0.
        deadline = time.monotonic() + 30
        while validations() == 0 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        assert validations() >= 1
        produce(server, "resume", [b"n0"])
        assert [(r.offset, r.value, r.leader_epoch) for r in poll(1)] == [(3, b"n0", 1)]
    finally:
        consumer.close()
