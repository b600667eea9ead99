"""IncrementalAlterConfigs (44), AlterConfigs (33) and DescribeConfigs (32) over TCP for topics, the broker
and groups, with kafka-python's KafkaAdminClient and confluent-kafka's AdminClient: Kafka's config sources
and synonyms (ConfigHelper.createTopicConfigEntry / createBrokerConfigEntry in core/src/main/scala/kafka/
server/ConfigHelper.scala), incremental operations (ConfigAdminManager.prepareIncrementalConfigs), dynamic
broker configs (DynamicBrokerConfig.validateConfigs) and group configs (GroupConfig.validate), all durable
across a restart.
"""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from confluent_kafka.admin import ResourceType as CResourceType
from kafka.admin import AlterConfigOp, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.admin import ConfigResource as KConfigResource

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.support.raw_kafka import RawKafka

TOPIC, BROKER, GROUP = 2, 4, 32


@pytest.fixture
def server(kcoord_server_factory):
    return kcoord_server_factory({"log.retention.bytes": "1000000000"})  # a static setting (--override)


@pytest.fixture
def admin(server):
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def describe(port: int, resource_type: int, name: str, keys=None):
    R = m.DescribeConfigsRequest
    with RawKafka(port) as c:
        resp = c.request(32, 4, R(resources=[R.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=keys)],
            include_synonyms=True, include_documentation=False))
    (result,) = resp.results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {e.name: (e.value, e.config_source, [(s.name, s.value, s.source) for s in e.synonyms])
            for e in result.configs}


def incremental(port: int, resource_type: int, name: str, ops, validate_only=False):
    R = m.IncrementalAlterConfigsRequest
    A = R.AlterConfigsResource
    with RawKafka(port) as c:
        resp = c.request(44, 1, R(resources=[A(resource_type=resource_type, resource_name=name, configs=[
            A.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
            validate_only=validate_only))
    (r,) = resp.responses
    return r.error_code, r.error_message


def test_topic_configs_sources_synonyms_and_operations(admin, server):
    admin.create_topics([NewTopic("cfg", 1, 1)])
    admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "cfg", configs={
        "retention.ms": (AlterConfigOp.SET, "3600000"), "cleanup.policy": (AlterConfigOp.APPEND, "compact")})])
    got = describe(server.port, TOPIC, "cfg")
    assert got["retention.ms"] == ("3600000", 1, [("retention.ms", "3600000", 1),
                                                  ("log.retention.hours", "168", 5)])
    assert got["cleanup.policy"][:2] == ("delete,compact", 1)
    # Not overridden: the source of the broker property behind it (STATIC_BROKER_CONFIG from --override).
    assert got["retention.bytes"] == ("1000000000", 4, [("log.retention.bytes", "1000000000", 4),
                                                        ("log.retention.bytes", "-1", 5)])
    assert got["segment.bytes"][1] == 5
    modified = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "cfg")])["topic"]["cfg"]
    assert set(modified) == {"retention.ms", "cleanup.policy"}

    assert incremental(server.port, TOPIC, "cfg", [("cleanup.policy", 3, "delete")]) == (ErrorCode.NONE, None)
    assert incremental(server.port, TOPIC, "cfg", [("retention.ms", 1, None)]) == (ErrorCode.NONE, None)
    got = describe(server.port, TOPIC, "cfg")
    assert got["cleanup.policy"][:2] == ("compact", 1) and got["retention.ms"][1] == 5
    # Errors as Kafka's: append to a non-list, unknown name, bad value, names twice, null SET, unknown topic.
    for ops, code in (([("retention.ms", 2, "1")], ErrorCode.INVALID_CONFIG),
                      ([("no.such.config", 0, "1")], ErrorCode.INVALID_CONFIG),
                      ([("retention.ms", 0, "soon")], ErrorCode.INVALID_CONFIG),
                      ([("cleanup.policy", 0, "sometimes")], ErrorCode.INVALID_CONFIG),
                      ([("retention.ms", 0, "1"), ("retention.ms", 1, None)], ErrorCode.INVALID_REQUEST),
                      ([("retention.ms", 0, None)], ErrorCode.INVALID_REQUEST)):
        assert incremental(server.port, TOPIC, "cfg", ops)[0] == code, ops
    assert incremental(server.port, TOPIC, "nope", [("retention.ms", 0, "1")])[0] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # validate_only changes nothing.
    assert incremental(server.port, TOPIC, "cfg", [("retention.ms", 0, "5")], validate_only=True)[0] == 0
    assert describe(server.port, TOPIC, "cfg")["retention.ms"][1] == 5

    # Durable: a restart keeps the overrides.
    server.restart()
    assert describe(server.port, TOPIC, "cfg")["cleanup.policy"][:2] == ("compact", 1)


def test_legacy_alter_configs_replaces_the_whole_set(admin, server):
    admin.create_topics([NewTopic("legacy", 1, 1, topic_configs={"retention.ms": "1000", "segment.bytes": "100000"})])
    result = admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "legacy", configs={"retention.bytes": "5000"})],
                                 incremental=False)
    assert result == {"topic": {"legacy": "OK"}}
    got = describe(server.port, TOPIC, "legacy")
    # kafka-python fills in the other modified keys (its documented AlterConfigs behaviour), so they stay.
    assert {k: v[0] for k, v in got.items() if v[1] == 1} == {"retention.ms": "1000", "segment.bytes": "100000",
                                                             "retention.bytes": "5000"}
    R = m.AlterConfigsRequest
    with RawKafka(server.port) as c:
        resp = c.request(33, 2, R(resources=[R.AlterConfigsResource(
            resource_type=TOPIC, resource_name="legacy",
            configs=[R.AlterConfigsResource.AlterableConfig(name="retention.ms", value="2000")])], validate_only=False))
    assert resp.responses[0].error_code == ErrorCode.NONE
    got = describe(server.port, TOPIC, "legacy")
    assert {k: v[0] for k, v in got.items() if v[1] == 1} == {"retention.ms": "2000"}


def test_dynamic_broker_configs_precedence_and_restart(admin, server):
    assert incremental(server.port, BROKER, "", [("log.retention.ms", 0, "7200000")]) == (ErrorCode.NONE, None)
    got = describe(server.port, BROKER, "1", ["log.retention.ms", "log.retention.bytes", "node.id"])
    assert got["log.retention.ms"] == ("7200000", 3, [("log.retention.ms", "7200000", 3),
                                                      ("log.retention.hours", "168", 5)])
    assert got["log.retention.bytes"][:2] == ("1000000000", 4)
    assert got["node.id"][1] == 5
    assert incremental(server.port, BROKER, "1", [("log.retention.ms", 0, "60000")]) == (ErrorCode.NONE, None)
    got = describe(server.port, BROKER, "1", ["log.retention.ms"])
    assert got["log.retention.ms"][:2] == ("60000", 2)
    assert [s[2] for s in got["log.retention.ms"][2]] == [2, 3, 5]
    assert describe(server.port, BROKER, "", None) == {"log.retention.ms": ("7200000", 3, [
        ("log.retention.ms", "7200000", 3)])}
    # A topic without an override follows the broker's dynamic value.
    admin.create_topics([NewTopic("follows", 1, 1)])
    assert describe(server.port, TOPIC, "follows")["retention.ms"][:2] == ("60000", 2)
    # Static properties cannot change at run time (INVALID_REQUEST, as DynamicBrokerConfig.validateConfigs).
    code, message = incremental(server.port, BROKER, "1", [("log.dirs", 0, "/tmp/x")])
    assert code == ErrorCode.INVALID_REQUEST and "Cannot update these configs dynamically" in message
    assert incremental(server.port, BROKER, "1", [("log.retention.ms", 0, "x")])[0] == ErrorCode.INVALID_REQUEST
    # kafka-python sees which broker properties are dynamic (read_only false).
    dynamic = admin.describe_configs([KConfigResource(ConfigResourceType.BROKER, "1")], config_filter="dynamic")
    assert "log.retention.ms" in dynamic["broker"]["1"] and "log.dirs" not in dynamic["broker"]["1"]

    server.restart()
    assert describe(server.port, BROKER, "1", ["log.retention.ms"])["log.retention.ms"][:2] == ("60000", 2)
    assert describe(server.port, TOPIC, "follows")["retention.ms"][:2] == ("60000", 2)


def test_confluent_admin_alters_and_describes_topic_and_broker(admin, server):
    admin.create_topics([NewTopic("rdk-cfg", 1, 1)])
    with AdminClient({"bootstrap.servers": server.bootstrap}) as client:
        topic = ConfigResource(CResourceType.TOPIC, "rdk-cfg", incremental_configs=[
            ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET)])
        broker = ConfigResource(CResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("log.segment.bytes", "20000000", incremental_operation=AlterConfigOpType.SET)])
        for future in client.incremental_alter_configs([topic, broker]).values():
            future.result(timeout=10)
        (topic_conf,) = client.describe_configs([ConfigResource(CResourceType.TOPIC, "rdk-cfg")]).values()
        entries = topic_conf.result(timeout=10)
        assert entries["retention.ms"].value == "120000"
        assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert entries["segment.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        (broker_conf,) = client.describe_configs([ConfigResource(CResourceType.BROKER, "1")]).values()
        entries = broker_conf.result(timeout=10)
        assert entries["log.segment.bytes"].value == "20000000" and not entries["log.segment.bytes"].is_read_only
        assert entries["log.retention.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        bad = ConfigResource(CResourceType.TOPIC, "rdk-cfg", incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND)])
        with pytest.raises(KafkaException) as info:
            list(client.incremental_alter_configs([bad]).values())[0].result(timeout=10)
        assert info.value.args[0].code() == ErrorCode.INVALID_CONFIG


def test_group_configs_validated_stored_and_described(admin, server):
    result = admin.alter_configs([KConfigResource(ConfigResourceType.GROUP, "orders", configs={
        "consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"})])
    assert result == {"group": {"orders": "OK"}}
    got = describe(server.port, GROUP, "orders")
    assert got["consumer.session.timeout.ms"] == ("50000", 8, [("consumer.session.timeout.ms", "50000", 8),
                                                               ("consumer.session.timeout.ms", "45000", 5)])
    assert got["share.auto.offset.reset"][:2] == ("latest", 5)
    # GroupConfig.validate: unknown names, bounds from the broker's group.consumer.* settings, session > heartbeat.
    for ops in ([("consumer.assignor", 0, "range")], [("consumer.session.timeout.ms", 0, "1000")],
                [("consumer.heartbeat.interval.ms", 0, "100000")], [("consumer.session.timeout.ms", 0, "x")],
                [("share.isolation.level", 0, "dirty")]):
        assert incremental(server.port, GROUP, "orders", ops)[0] == ErrorCode.INVALID_CONFIG, ops
    assert incremental(server.port, GROUP, "orders", [("consumer.heartbeat.interval.ms", 1, None)]) == (0, None)
    server.restart()
    got = describe(server.port, GROUP, "orders")
    assert got["consumer.session.timeout.ms"][:2] == ("50000", 8)
    assert got["consumer.heartbeat.interval.ms"][:2] == ("5000", 5)


def test_group_config_lookup_for_the_coordinator(tmp_path):
    """The coordinator reads a group's overrides, typed, from the broker's store."""
    from kcoord.broker.config import BrokerConfig
    from kcoord.metadata.group_configs import ConfigInvalid, GroupConfigStore

    store = GroupConfigStore(str(tmp_path), BrokerConfig())
    store.replace("g", {"consumer.session.timeout.ms": "55000", "share.auto.offset.reset": "by_duration:PT1H"})
    assert store.group_config("g") == {"consumer.session.timeout.ms": 55000, "share.auto.offset.reset": "by_duration:PT1H"}
    assert store.group_config("other") == {}
    with pytest.raises(ConfigInvalid):
        store.replace("g", {"share.auto.offset.reset": "by_duration:soon"})
    assert GroupConfigStore(str(tmp_path), BrokerConfig()).group_config("g")["consumer.session.timeout.ms"] == 55000


def test_group_session_timeout_must_exceed_the_heartbeat_interval():
    """GroupConfig.validateValues' last checks, with bounds wide enough to reach them."""
    from kcoord.metadata.group_configs import ConfigInvalid, validate_group_configs

    class WideBounds:
        def get(self, name):
            return 1 if ".min." in name else 10**6

    with pytest.raises(ConfigInvalid, match="consumer.session.timeout.ms must be greater than"):
        validate_group_configs({"consumer.session.timeout.ms": "4000", "consumer.heartbeat.interval.ms": "4000"},
                               WideBounds())
    assert validate_group_configs({"consumer.session.timeout.ms": "4001", "consumer.heartbeat.interval.ms": "4000"},
                                  WideBounds()) == {"consumer.session.timeout.ms": 4001,
                                                    "consumer.heartbeat.interval.ms": 4000}
