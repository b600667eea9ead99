"""Admin APIs through kafka-python's KafkaAdminClient against the real server."""
from __future__ import annotations

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)


@pytest.fixture
def admin(kcoord_server):
    client = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def test_create_describe_delete_topic(admin, kcoord_server):
    admin.create_topics([NewTopic("orders", 6, 1, topic_configs={"retention.ms": "3600000"})])
    assert "orders" in admin.list_topics()
    (desc,) = admin.describe_topics(["orders"])
    assert desc["error_code"] == 0 and not desc["is_internal"]
    assert sorted(p["partition_index"] for p in desc["partitions"]) == list(range(6))
    assert {(p["leader_id"], p["leader_epoch"]) for p in desc["partitions"]} == {(1, 0)}
    topic_id = desc["topic_id"]

    admin.delete_topics(["orders"])
    assert "orders" not in admin.list_topics()
    admin.create_topics([NewTopic("orders", 2, 1)])
    (again,) = admin.describe_topics(["orders"])
    assert again["topic_id"] != topic_id and len(again["partitions"]) == 2


@pytest.mark.parametrize("topic, error", [
    (NewTopic("bad/name", 1, 1), InvalidTopicError),
    (NewTopic("x" * 250, 1, 1), InvalidTopicError),
    (NewTopic("zero", 0, 1), InvalidPartitionsError),
    (NewTopic("rf3", 1, 3), InvalidReplicationFactorError),
])
def test_create_topics_errors(admin, topic, error):
    with pytest.raises(error):
        admin.create_topics([topic])
    assert topic.name not in admin.list_topics()


def test_create_existing_topic_and_validate_only(admin):
    admin.create_topics([NewTopic("dup", 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("dup", 1, 1)])
    admin.create_topics([NewTopic("dry", 3, 1)], validate_only=True)
    assert "dry" not in admin.list_topics()


def test_delete_unknown_topic(admin):
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["nope"])


def test_describe_configs_for_topic_and_broker(admin):
    admin.create_topics([NewTopic("cfg", 1, 1, topic_configs={"cleanup.policy": "compact"})])
    resources = [ConfigResource(ConfigResourceType.TOPIC, "cfg"), ConfigResource(ConfigResourceType.BROKER, "1")]
    modified = admin.describe_configs(resources)
    assert modified["topic"]["cfg"]["cleanup.policy"]["value"] == "compact"
    assert modified["topic"]["cfg"]["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert "retention.ms" not in modified["topic"]["cfg"]  # a default, not an override
    everything = admin.describe_configs(resources, config_filter="all")
    assert everything["topic"]["cfg"]["retention.ms"]["value"] == "604800000"
    broker_cfg = everything["broker"]["1"]
    assert broker_cfg["num.partitions"]["value"] == "1"
    assert broker_cfg["message.max.bytes"]["value"] == "1048588"
    assert broker_cfg["log.dirs"]["read_only"] is True


def test_topic_id_is_stable_across_restart(kcoord_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap)
    admin.create_topics([NewTopic("keep", 3, 1)])
    (before,) = admin.describe_topics(["keep"])
    admin.close()
    kcoord_server.restart()
    admin = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap)
    (after,) = admin.describe_topics(["keep"])
    admin.close()
    assert after["topic_id"] == before["topic_id"]
    assert len(after["partitions"]) == 3



def test_describe_cluster(admin, kcoord_server):
    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert cluster["cluster_id"]
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, kcoord_server.port)]
