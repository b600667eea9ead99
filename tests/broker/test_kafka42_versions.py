"""The version ranges Kafka 4.2 serves for the data plane (Produce 13, Fetch 18, ListOffsets 11,
DescribeCluster 2), over TCP, and what kafka-python infers from them.

kafka-python's broker-version inference (kafka/protocol/broker_version_data.py,
infer_broker_version_from_api_versions) keys 4.2 on ListOffsets v11 and 4.1 on Produce v13.
ListOffsets' special timestamps follow Kafka's UnifiedLog.fetchOffsetByTimestamp without tiered storage
(storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java).
"""
from __future__ import annotations

import uuid

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import build_batch
from tests.support.raw_kafka import RawKafka


def test_kafka_python_infers_kafka_4_2(kcoord_shared_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_shared_server.bootstrap)
    try:
        assert admin._client.check_version() >= (4, 2)
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=kcoord_shared_server.bootstrap, api_version=None)
    try:
        assert consumer.config["api_version"] >= (4, 2)
    finally:
        consumer.close()


def test_kafka_python_round_trip_at_the_new_versions(kcoord_shared_server):
    """kafka-python 3.0.12 picks the highest version it implements of each: ListOffsets v11 now (Produce v9 and
    Fetch v12 are its own maxima; librdkafka 2.16 stops at Produce v10 / Fetch v16), so the newest Produce and
    Fetch versions are exercised on the wire here and in test_every_advertised_version."""
    bootstrap = kcoord_shared_server.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("v42", 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    sent = [producer.send("v42", b"r%d" % i, partition=0).get(timeout=10).offset for i in range(3)]
    producer.close()
    assert sent == [0, 1, 2]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    tp = TopicPartition("v42", 0)
    consumer.assign([tp])
    got = []
    for _ in range(50):
        got += consumer.poll(timeout_ms=200).get(tp, [])
        if len(got) == 3:
            break
    consumer.close()
    assert [r.value for r in got] == [b"r0", b"r1", b"r2"]


def test_produce_v13_by_topic_id(kcoord_shared_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_shared_server.bootstrap)
    admin.create_topics([NewTopic("by-id", 1, 1)])
    (desc,) = admin.describe_topics(["by-id"])
    admin.close()
    R = m.ProduceRequest
    unknown = uuid.uuid4()
    req = R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        R.TopicProduceData(topic_id=topic_id, partition_data=[
            R.TopicProduceData.PartitionProduceData(index=0, records=build_batch([(None, b"x")]))])
        for topic_id in (uuid.UUID(desc["topic_id"]) if isinstance(desc["topic_id"], str) else desc["topic_id"],
                         unknown)])
    with RawKafka(kcoord_shared_server.port) as c:
        resp = c.request(0, 13, req)
    assert [(t.topic_id == unknown, [(p.error_code, p.base_offset) for p in t.partition_responses])
            for t in resp.responses] == [(False, [(ErrorCode.NONE, 0)]), (True, [(ErrorCode.UNKNOWN_TOPIC_ID, -1)])]


def test_list_offsets_special_timestamps_by_version(kcoord_shared_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_shared_server.bootstrap)
    admin.create_topics([NewTopic("stamps", 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=kcoord_shared_server.bootstrap)
    for i in range(2):
        producer.send("stamps", b"s%d" % i, partition=0).get(timeout=10)
    producer.close()
    R = m.ListOffsetsRequest

    def ask(version: int, timestamp: int):
        with RawKafka(kcoord_shared_server.port) as c:
            resp = c.request(2, version, R(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
                R.ListOffsetsTopic(name="stamps", partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])]))
        p = resp.topics[0].partitions[0]
        return p.error_code, p.offset

    assert ask(11, -4) == (ErrorCode.NONE, 0)     # earliest local: the whole log is local
    assert ask(11, -5) == (ErrorCode.NONE, -1)    # latest tiered: nothing is tiered
    assert ask(11, -6) == (ErrorCode.NONE, -1)    # earliest pending upload: nothing waits
    assert ask(11, -1) == (ErrorCode.NONE, 2)
    assert ask(7, -4)[0] == ask(8, -5)[0] == ask(10, -6)[0] == ErrorCode.UNSUPPORTED_VERSION


def test_describe_cluster_v2(kcoord_shared_server):
    with RawKafka(kcoord_shared_server.port) as c:
        resp = c.request(60, 2, m.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                         endpoint_type=1, include_fenced_brokers=True))
    assert [(b.broker_id, b.is_fenced) for b in resp.brokers] == [(1, False)]
