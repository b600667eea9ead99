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


# -- v5: IsCordoned (KIP-1066) ----------------------------------------------------------------------------
# Kafka 4.3's behaviour, as core/src/test/java/kafka/server/CordonedLogDirsIntegrationTest.java pins it
# (testStaticCordonUncordonLogDirs, testCordonUncordonLogDirs, testFeatureNotEnabledStaticConfig): a cordoned
# directory is reported IsCordoned; with every directory of the only broker cordoned, CreateTopics and
# CreatePartitions fail with INVALID_REPLICATION_FACTOR; below metadata.version 4.3-IV0 the static setting has
# no effect and a dynamic one is refused (INVALID_CONFIG).
def _admin(server) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=server.bootstrap)


def _cordoned(admin: KafkaAdminClient) -> bool:
    (answer,) = admin.describe_log_dirs()
    (result,) = answer["log_dirs"]
    return result["is_cordoned"]


def _set_cordoned(admin: KafkaAdminClient, value: str) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs={"cordoned.log.dirs": value})],
                        raise_on_unknown=False, incremental=True)


def _create_error(port: int, name: str):
    with RawKafka(port) as c:
        R = m.CreateTopicsRequest
        resp = c.request(19, 7, R(topics=[R.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                                                           assignments=[], configs=[])],
                                  timeout_ms=5000, validate_only=False))
    return resp.topics[0].error_code


def _add_partition_error(port: int, topic: str, count: int):
    with RawKafka(port) as c:
        R = m.CreatePartitionsRequest
        resp = c.request(37, 3, R(topics=[R.CreatePartitionsTopic(name=topic, count=count, assignments=None)],
                                  timeout_ms=5000, validate_only=False))
    return resp.results[0].error_code


def test_v5_reports_a_statically_cordoned_dir_and_no_partition_is_placed_in_it(kcoord_server_factory):
    server = kcoord_server_factory({"cordoned.log.dirs": "*"})
    admin = _admin(server)
    try:
        assert _cordoned(admin) is True
        assert _create_error(server.port, "nowhere") == ErrorCode.INVALID_REPLICATION_FACTOR
        _set_cordoned(admin, "")  # a dynamic empty value uncordons
        assert _cordoned(admin) is False
        assert _create_error(server.port, "somewhere") == ErrorCode.NONE
        _set_cordoned(admin, str(server.data_dir))  # the directory by its path
        assert _cordoned(admin) is True
        assert _add_partition_error(server.port, "somewhere", 2) == ErrorCode.INVALID_REPLICATION_FACTOR
        with RawKafka(server.port) as c:  # the partitions already there keep being described (and served)
            resp = c.request(35, 5, m.DescribeLogDirsRequest(topics=None))
            assert "somewhere" in [t.name for t in resp.results[0].topics] and resp.results[0].is_cordoned
            assert not c.request(35, 4, m.DescribeLogDirsRequest(topics=None)).results[0].is_cordoned, \
                "v4 has no IsCordoned: the reader's default"
    finally:
        admin.close()
    server.restart()  # the dynamic value is durable
    admin = _admin(server)
    try:
        assert _cordoned(admin) is True
    finally:
        admin.close()


def test_a_cordoned_dir_that_is_no_log_dir_is_refused(kcoord_server):
    admin = _admin(kcoord_server)
    try:
        with RawKafka(kcoord_server.port) as c:
            R = m.IncrementalAlterConfigsRequest
            resp = c.request(44, 1, R(resources=[R.AlterConfigsResource(
                resource_type=4, resource_name="1", configs=[R.AlterableConfig(
                    name="cordoned.log.dirs", config_operation=0, value="/not/a/log/dir")])], validate_only=False))
        assert resp.responses[0].error_code == ErrorCode.INVALID_REQUEST
        assert "/not/a/log/dir not in log.dirs" in resp.responses[0].error_message
        assert _cordoned(admin) is False
    finally:
        admin.close()


def test_below_metadata_version_4_3_cordoning_has_no_effect_until_upgraded(kcoord_server_factory, tmp_path):
    """A data dir finalized at metadata.version 4.2-IV1 (29), as a cluster upgraded from 4.2 keeps it until
    the operator finalizes 4.3 (testFeatureNotEnabledStaticConfig)."""
    import json

    data = tmp_path / "mv29-data"
    data.mkdir()
    levels = {"metadata.version": 29, "group.version": 1, "transaction.version": 2, "share.version": 1}
    (data / "kcoord-features.json").write_text(json.dumps({"version": 1, "epoch": 0, "levels": levels}))
    server = kcoord_server_factory({"cordoned.log.dirs": "*"}, name="mv29")
    admin = _admin(server)
    try:
        assert _cordoned(admin) is False
        assert _create_error(server.port, "created-at-4.2") == ErrorCode.NONE
        with RawKafka(server.port) as c:
            R = m.IncrementalAlterConfigsRequest
            resp = c.request(44, 1, R(resources=[R.AlterConfigsResource(
                resource_type=4, resource_name="1", configs=[R.AlterableConfig(
                    name="cordoned.log.dirs", config_operation=0, value="")])], validate_only=False))
        assert resp.responses[0].error_code == ErrorCode.INVALID_CONFIG
        assert admin.update_features({"metadata.version": 30}) == {"metadata.version": "OK"}
        assert _cordoned(admin) is True
        assert _create_error(server.port, "created-at-4.3") == ErrorCode.INVALID_REPLICATION_FACTOR
    finally:
        admin.close()
