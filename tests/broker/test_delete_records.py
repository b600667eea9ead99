"""DeleteRecords (21) over TCP with kafka-python's KafkaAdminClient and confluent-kafka's AdminClient:
the log start offset moves (durably: Kafka's log-start-offset-checkpoint), ListOffsets earliest and
Fetch see it (OFFSET_OUT_OF_RANGE below it), consumers with auto.offset.reset=earliest start there, and
the next retention pass removes the segments wholly below it (the test reads the segment files).

Errors follow Kafka's Partition.deleteRecordsOnLeader and ReplicaManager.deleteRecords
(core/src/main/scala/kafka/cluster/Partition.scala, core/src/main/scala/kafka/server/ReplicaManager.scala).
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import (
    InvalidTopicError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.support.raw_kafka import RawKafka

TP = TopicPartition("trim", 0)
N = 12


@pytest.fixture
def server(kcoord_server_factory):
    # Retention passes every 200 ms, so the segments below the new start go quickly.
    return kcoord_server_factory({"log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "200"})


def fill(bootstrap: str) -> None:
    """N one-record batches in segments of ~3 batches each."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("trim", 1, 1, topic_configs={"segment.bytes": "300"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    for i in range(N):
        producer.send("trim", b"v%d" % i, partition=0).get(timeout=10)
    producer.close()


def segment_bases(server) -> list[int]:
    return sorted(int(p.stem) for p in (server.data_dir / "trim-0").glob("*.log"))


def earliest(bootstrap: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return consumer.beginning_offsets([TP])[TP]
    finally:
        consumer.close()


def fetch_at(port: int, offset: int):
    R = m.FetchRequest
    part = R.FetchTopic.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                                       current_leader_epoch=-1, last_fetched_epoch=-1, log_start_offset=-1)
    with RawKafka(port) as c:
        resp = c.request(1, 12, R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                  isolation_level=0, session_id=0, session_epoch=-1,
                                  topics=[R.FetchTopic(topic="trim", partitions=[part])],
                                  forgotten_topics_data=[], rack_id=""))
    return resp.responses[0].partitions[0]


def first_consumed(bootstrap: str) -> int:
    """The first offset a consumer without a position reads with auto.offset.reset=earliest (assigned, not
    in a group: kafka-python 3.0.12's group assignment occasionally stays empty after a metadata race,
    which is not what this test is about)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    consumer.assign([TP])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                return records[0].offset
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def test_delete_records_moves_the_log_start_for_every_reader(server):
    fill(server.bootstrap)
    assert len(segment_bases(server)) >= 3
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    result = admin.delete_records({TP: 5})
    assert result[TP]["low_watermark"] == 5
    assert earliest(server.bootstrap) == 5
    below = fetch_at(server.port, 2)
    assert (below.error_code, below.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, 5)
    assert first_consumed(server.bootstrap) == 5

    # Below the current start: nothing moves, the answer is the current start.
    assert admin.delete_records({TP: 3})[TP]["low_watermark"] == 5
    # confluent-kafka (librdkafka) too.
    client = AdminClient({"bootstrap.servers": server.bootstrap})
    (done,) = client.delete_records([CTopicPartition("trim", 0, 7)]).values()
    assert done.result(timeout=10).low_watermark == 7
    admin.close()

    # The next retention pass drops every segment wholly below offset 7, and only those.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len([b for b in segment_bases(server) if b <= 7]) > 1:
        time.sleep(0.1)
    bases = segment_bases(server)
    assert bases[0] < 7 and all(b > 7 for b in bases[1:]), bases  # the new start lies inside a segment

    # Durable: after a restart the start is still 7, inside a segment (log-start-offset-checkpoint).
    server.restart()
    assert earliest(server.bootstrap) == 7
    assert (server.data_dir / "log-start-offset-checkpoint").read_text().splitlines() == ["0", "1", "trim 0 7"]
    assert first_consumed(server.bootstrap) == 7


def test_delete_to_the_high_watermark_and_errors(server):
    fill(server.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic("compacted", 1, 1, topic_configs={"cleanup.policy": "compact"})])
    with pytest.raises(OffsetOutOfRangeError):
        admin.delete_records({TP: N + 1})
    with pytest.raises(PolicyViolationError):
        admin.delete_records({TopicPartition("compacted", 0): 0})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_records({TopicPartition("trim", 3): 0}, partition_leader_id=1)
    with pytest.raises(InvalidTopicError):
        admin.delete_records({TopicPartition("__consumer_offsets", 0): 0}, partition_leader_id=1)
    # -1: everything below the high watermark.
    assert admin.delete_records({TP: -1})[TP]["low_watermark"] == N
    assert earliest(server.bootstrap) == N
    admin.close()
