"""DescribeLogDirs (35) over TCP with kafka-python's KafkaAdminClient.describe_log_dirs (confluent-kafka's
AdminClient has no describe_log_dirs): sizes are the partitions' segment bytes on disk, as Kafka's
ReplicaManager.describeLogDirs reports them (core/src/main/scala/kafka/server/ReplicaManager.scala)."""
from __future__ import annotations

import os

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.support.raw_kafka import RawKafka


def test_describe_log_dirs_reports_the_partitions_on_disk(kcoord_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap)
    admin.create_topics([NewTopic("dirs", 3, 1)])
    producer = KafkaProducer(bootstrap_servers=kcoord_server.bootstrap)
    for i in range(5):
        producer.send("dirs", b"value-%d" % i, partition=1)
    producer.flush(timeout=10)
    producer.close()

    (answer,) = admin.describe_log_dirs({"dirs": [0, 1, 2, 7]})
    admin.close()
    assert answer["broker"] == 1
    (result,) = answer["log_dirs"]
    assert result["error_code"] == 0 and result["log_dir"] == os.path.abspath(kcoord_server.data_dir)
    assert result["total_bytes"] >= result["usable_bytes"] > 0
    (topic,) = result["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    assert set(sizes) == {0, 1, 2}  # partition 7 does not exist: left out, as Kafka does
    on_disk = sum(f.stat().st_size for f in (kcoord_server.data_dir / "dirs-1").glob("*.log"))
    assert sizes[1] == on_disk > 0 and sizes[0] == sizes[2] == 0
    assert {p["offset_lag"] for p in topic["partitions"]} == {0}


def test_null_topics_means_every_partition(kcoord_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap)
    admin.create_topics([NewTopic("one", 1, 1), NewTopic("two", 2, 1)])
    admin.close()
    with RawKafka(kcoord_server.port) as c:
        resp = c.request(35, 4, m.DescribeLogDirsRequest(topics=None))
    assert resp.error_code == ErrorCode.NONE
    listed = {(t.name, p.partition_index) for t in resp.results[0].topics for p in t.partitions}
    assert {("one", 0), ("two", 0), ("two", 1)} <= listed
