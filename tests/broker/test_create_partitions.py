"""CreatePartitions (37) over TCP with real clients: kafka-python KafkaAdminClient, confluent-kafka
AdminClient, kcat -L, and a running kafka-python consumer group that picks the new partitions up.

Error answers follow Kafka's ReplicationControlManager.createPartitions and ControllerApis.createPartitions
(metadata/src/main/java/org/apache/kafka/controller/ReplicationControlManager.java,
core/src/main/scala/kafka/server/ControllerApis.scala).
"""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationAssignmentError,
    UnknownTopicOrPartitionError,
)

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.support.raw_kafka import RawKafka


@pytest.fixture
def admin(kcoord_shared_server):
    client = KafkaAdminClient(bootstrap_servers=kcoord_shared_server.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def partition_count(admin, topic: str) -> int:
    (desc,) = admin.describe_topics([topic])
    return len(desc["partitions"])


def test_kafka_python_grows_a_topic_and_metadata_shows_it(admin, kcoord_shared_server):
    admin.create_topics([NewTopic("grow", 2, 1)])
    admin.create_partitions({"grow": 5})
    assert partition_count(admin, "grow") == 5
    # The new partitions have logs: they take records at once.
    producer = KafkaProducer(bootstrap_servers=kcoord_shared_server.bootstrap)
    meta = producer.send("grow", b"to-4", partition=4).get(timeout=10)
    producer.close()
    assert (meta.partition, meta.offset) == (4, 0)


def test_errors_as_kafka(admin):
    admin.create_topics([NewTopic("fixed", 3, 1)])
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"fixed": 2})
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"fixed": 3})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.create_partitions({"no-such-topic": 4})
    with pytest.raises(InvalidReplicationAssignmentError):
        admin.create_partitions({"fixed": {"count": 5, "assignments": [[1]]}})
    with pytest.raises(InvalidReplicationAssignmentError):
        admin.create_partitions({"fixed": {"count": 4, "assignments": [[2]]}})
    admin.create_partitions({"fixed": 4}, validate_only=True)
    assert partition_count(admin, "fixed") == 3
    admin.create_partitions({"fixed": {"count": 4, "assignments": [[1]]}})
    assert partition_count(admin, "fixed") == 4


def test_messages_and_duplicates_on_the_wire(admin, kcoord_shared_server):
    """Duplicates are answered first, once per name, with INVALID_REQUEST (ControllerApis.createPartitions);
    the messages are ReplicationControlManager's."""
    admin.create_topics([NewTopic("wire", 2, 1), NewTopic("other", 1, 1)])
    T = m.CreatePartitionsRequest.CreatePartitionsTopic
    req = m.CreatePartitionsRequest(topics=[T(name="wire", count=3, assignments=None),
                                            T(name="other", count=1, assignments=None),
                                            T(name="wire", count=4, assignments=None),
                                            T(name="gone", count=2, assignments=None)],
                                    timeout_ms=5000, validate_only=False)
    with RawKafka(kcoord_shared_server.port) as c:
        resp = c.request(37, 3, req)
    assert [(r.name, r.error_code, r.error_message) for r in resp.results] == [
        ("wire", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("other", ErrorCode.INVALID_PARTITIONS, "Topic already has 1 partition(s)."),
        ("gone", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)]
    assert partition_count(admin, "wire") == 2


def test_confluent_admin_and_kcat_see_the_new_count(admin, kcoord_shared_server):
    admin.create_topics([NewTopic("rdk", 1, 1)])
    with AdminClient({"bootstrap.servers": kcoord_shared_server.bootstrap}) as client:
        client.create_partitions([NewPartitions("rdk", 3)])["rdk"].result(timeout=10)
        with pytest.raises(KafkaException) as info:
            client.create_partitions([NewPartitions("rdk", 2)])["rdk"].result(timeout=10)
    assert info.value.args[0].code() == ErrorCode.INVALID_PARTITIONS
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat; make tools does it)")
    out = subprocess.run([kcat, "-b", kcoord_shared_server.bootstrap, "-L", "-t", "rdk"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert 'topic "rdk" with 3 partitions' in out.stdout


def test_running_consumer_group_picks_up_new_partitions(admin, kcoord_shared_server):
    """The group's leader sees the partition count change in its metadata and rejoins (kafka-python's
    ConsumerCoordinator.need_rejoin on a metadata snapshot change); the coordinator needs nothing new."""
    bootstrap = kcoord_shared_server.bootstrap
    admin.create_topics([NewTopic("live", 1, 1)])
    deadline = time.monotonic() + 30
    # the consumer joins once its Metadata shows the partition: a join whose metadata lacked it assigns
    # nothing, and kafka-python's rejoin on the next metadata change can stall (the race test_example_app.py's
    # App describes), seen in a CI run: "No partition metadata for topic live", then no assignment
    while not any(t["partitions"] for t in admin.describe_topics(["live"])) and time.monotonic() < deadline:
        time.sleep(0.05)
    consumer = KafkaConsumer("live", bootstrap_servers=bootstrap, group_id="live-group",
                             auto_offset_reset="earliest", metadata_max_age_ms=300, consumer_timeout_ms=200)
    consumer.partitions_for_topic("live")  # its own metadata before the first join: see tests/test_example_app.py's App
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        while consumer.assignment() != {TopicPartition("live", 0)} and time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
        assert consumer.assignment() == {TopicPartition("live", 0)}
        admin.create_partitions({"live": 3})
        for p in range(3):
            producer.send("live", b"p%d" % p, partition=p)
        producer.flush(timeout=10)
        got = set()
        while len(got) < 3 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.update((r.partition, r.value) for r in records)
        assert got == {(0, b"p0"), (1, b"p1"), (2, b"p2")}
        assert consumer.assignment() == {TopicPartition("live", p) for p in range(3)}
    finally:
        producer.close()
        consumer.close()
