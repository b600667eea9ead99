"""ShareFetch in a 2-node cluster on a real etcd (KIP-932 on issue #26's replication): the partition's
leader serves share consumers, up to the ISR's high watermark; its follower answers
NOT_LEADER_OR_FOLLOWER for the partition, as Kafka's SharePartitionManager does through
ReplicaManager.getPartitionOrException for a partition it does not lead."""
from __future__ import annotations

import pytest

from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.share.test_share_fetch_wire import acquired, fetch, partition

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120),
              pytest.mark.kcoord_cluster(nodes=2, session_timeout_ms=2000, overrides={
                  "share.coordinator.state.topic.replication.factor": 2, "share.coordinator.state.topic.min.isr": 1})]
TOPIC = "share-replicated"


def test_leader_serves_share_fetch_follower_refuses(kafka_cluster):
    from confluent_kafka import Producer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 2)])
    finally:
        admin.close()
    leader = kafka_cluster.wait_leader(TOPIC, 0, timeout=15)
    kafka_cluster.wait_isr(TOPIC, 0, 2)
    follower = next(n for n in kafka_cluster.nodes if n != leader)
    [t] = kafka_cluster.metadata(topics=[TOPIC]).topics
    with KafkaWireClient.connect(kafka_cluster.nodes[follower].bootstrap_servers, timeout=10) as client:
        assert partition(fetch(client, "g", "f1", 0, t.topic_id)).error_code == E.NOT_LEADER_OR_FOLLOWER
    with KafkaWireClient.connect(kafka_cluster.nodes[leader].bootstrap_servers, timeout=10) as client:
        first = fetch(client, "g", "l1", 0, t.topic_id)  # share.auto.offset.reset latest: starts at the end
        assert (first.error_code, partition(first).error_code, acquired(first)) == (E.NONE, E.NONE, [])
        producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
        for i in range(5):
            producer.produce(TOPIC, value=b"%d" % i)
        assert producer.flush(30) == 0
        got = fetch(client, "g", "l1", 1, t.topic_id, max_wait_ms=10_000)
        assert acquired(got) == [(0, 4, 1)]
