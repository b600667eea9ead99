"""Topic, dynamic broker and group configs are the cluster's (issue #26): 3 real nodes on a real etcd, raw
IncrementalAlterConfigs / DescribeConfigs to chosen nodes. A topic config changed through a node that is
neither controller nor replica is described by every node (one with no replica of the topic too), survives
a node's restart, composes with changes through other nodes (compare-and-set on `config/topics/<t>`) and
goes with its topic; a cluster-default broker config and a group config changed through one node apply
on every node.
Kafka: ConfigAdminManager / ConfigHelper answer from the broker's metadata image, which every broker
follows (ZooKeeper-era: AdminZkClient.changeTopicConfig / changeBrokerConfig + change notifications)."""
from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from tests.cluster.replication_checks import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000)]

TOPIC, SET, DELETE = 2, 0, 1
DYNAMIC_TOPIC_CONFIG = 1


def _alter(cluster, via: int, name: str, ops: list[tuple[str, int, str | None]], resource_type: int = TOPIC
           ) -> ErrorCode:
    R = m.IncrementalAlterConfigsRequest
    with KafkaWireClient.connect(cluster.nodes[via].bootstrap_servers, timeout=10) as wire:
        response = wire.request(R(resources=[R.AlterConfigsResource(
            resource_type=resource_type, resource_name=name,
            configs=[R.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])],
            validate_only=False), 1)
    return ErrorCode(response.responses[0].error_code)


def _describe(cluster, via: int, topic: str) -> dict[str, tuple[str, int]] | ErrorCode:
    R = m.DescribeConfigsRequest
    with KafkaWireClient.connect(cluster.nodes[via].bootstrap_servers, timeout=10) as wire:
        response = wire.request(R(resources=[R.DescribeConfigsResource(
            resource_type=TOPIC, resource_name=topic, configuration_keys=None)],
            include_synonyms=False, include_documentation=False), 4)
    result = response.results[0]
    if result.error_code:
        return ErrorCode(result.error_code)
    return {c.name: (c.value, c.config_source) for c in result.configs}


def _described(cluster, via: int, topic: str) -> dict[str, tuple[str, int]] | None:
    described = _describe(cluster, via, topic)
    return described if isinstance(described, dict) else None


def _create(cluster, name: str, assignment: list[int]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name, replica_assignments={0: assignment},
                                      topic_configs={"cleanup.policy": "delete", "retention.ms": "600000"})])
    finally:
        admin.close()
    cluster.wait_isr(name, 0, len(assignment))


def test_a_topic_config_changed_through_any_node_is_seen_by_every_node(kafka_cluster):
    """`solo` lives on node 1 only; the change goes through node 3 (no replica; the controller is node 1,
    the first to start). Every node then describes retention.ms=1234 as DYNAMIC_TOPIC_CONFIG with the
    creation's cleanup.policy kept; after node 1's SIGKILL + restart
    it still does; a DELETE through node 2 drops the override everywhere; an unknown topic is
    UNKNOWN_TOPIC_OR_PARTITION wherever it is asked."""
    cluster = kafka_cluster
    _create(cluster, "solo", [1])
    assert _alter(cluster, 3, "solo", [("retention.ms", SET, "1234")]) is ErrorCode.NONE
    assert _describe(cluster, 3, "solo")["retention.ms"] == ("1234", DYNAMIC_TOPIC_CONFIG)  # read-your-writes
    for via in (1, 2):
        wait_until(lambda v=via: _describe(cluster, v, "solo")["retention.ms"] == ("1234", DYNAMIC_TOPIC_CONFIG),
                   10, f"node {via} describing the change")
        assert _describe(cluster, via, "solo")["cleanup.policy"] == ("delete", DYNAMIC_TOPIC_CONFIG)

    cluster.kill(1)
    cluster.restart(1)
    cluster.wait_leader("solo", 0)
    assert _describe(cluster, 1, "solo")["retention.ms"] == ("1234", DYNAMIC_TOPIC_CONFIG)

    assert _alter(cluster, 2, "solo", [("retention.ms", DELETE, None)]) is ErrorCode.NONE
    for via in (1, 2, 3):
        wait_until(lambda v=via: _describe(cluster, v, "solo")["retention.ms"][1] != DYNAMIC_TOPIC_CONFIG, 10,
                   f"node {via} dropping the override")
        assert _describe(cluster, via, "solo")["cleanup.policy"] == ("delete", DYNAMIC_TOPIC_CONFIG)
    for via in (1, 2, 3):
        assert _describe(cluster, via, "nope") is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _alter(cluster, via, "nope", [("retention.ms", SET, "1")]) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.kcoord_shared_cluster
def test_changes_through_different_nodes_compose(kafka_cluster):
    """Incremental changes to different configs through nodes 1, 2 and 3 in turn: each starts from the
    cluster's current set (as every node has it once its own write is answered), so none is lost; a bad
    value is INVALID_CONFIG and changes nothing."""
    cluster = kafka_cluster
    _create(cluster, "shared", [1, 2, 3])
    changes = [(1, "retention.ms", "1000"), (2, "segment.ms", "2000"), (3, "max.message.bytes", "3000")]
    for via, name, value in changes:
        wait_until(lambda v=via: isinstance(_describe(cluster, v, "shared"), dict), 10, "the topic")
        assert _alter(cluster, via, "shared", [(name, SET, value)]) is ErrorCode.NONE
        wait_until(lambda n=name, val=value: all(
            _describe(cluster, v, "shared").get(n, ("", 0))[0] == val for v in (1, 2, 3)), 10, f"{name} everywhere")
    assert _alter(cluster, 2, "shared", [("retention.ms", SET, "not-a-number")]) is ErrorCode.INVALID_CONFIG
    for via in (1, 2, 3):
        described = _describe(cluster, via, "shared")
        assert isinstance(described, dict)
        assert {n: described[n][0] for _v, n, _val in changes} == {n: val for _v, n, val in changes}


@pytest.mark.kcoord_shared_cluster
def test_a_deleted_topic_takes_its_changed_configs_with_it(kafka_cluster):
    """DeleteTopics removes `config/topics/<t>` with the topic (ReplicationControlManager.deleteTopic drops
    its ConfigRecords too): the topic created again under the name has only its own configs."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    cluster = kafka_cluster
    _create(cluster, "again", [1, 2, 3])
    assert _alter(cluster, 2, "again", [("retention.ms", SET, "1234")]) is ErrorCode.NONE
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.delete_topics(["again"])
        wait_until(lambda: all(_describe(cluster, v, "again") is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                               for v in (1, 2, 3)), 10, "the topic gone")

        def created() -> bool:
            try:
                admin.create_topics([NewTopic("again", 1, 3)])
            except TopicAlreadyExistsError:  # the deletion has not reached the controller's image yet
                return False
            return True

        wait_until(created, 10, "the topic created again")
    finally:
        admin.close()
    cluster.wait_isr("again", 0, 3)
    for via in (1, 2, 3):
        described = wait_until(lambda v=via: _described(cluster, v, "again"), 10, f"node {via} knowing the new topic")
        assert described["retention.ms"][1] != DYNAMIC_TOPIC_CONFIG, described


BROKER, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 4, 2, 3


def _broker_config(cluster, via: int, key: str, resource_type: int = BROKER, name: str | None = None
                   ) -> tuple[str, int]:
    """`key` of a resource as node `via` describes it (by default node `via`'s own BROKER resource)."""
    R = m.DescribeConfigsRequest
    with KafkaWireClient.connect(cluster.nodes[via].bootstrap_servers, timeout=10) as wire:
        response = wire.request(R(resources=[R.DescribeConfigsResource(
            resource_type=resource_type, resource_name=str(via) if name is None else name, configuration_keys=[key])],
            include_synonyms=False, include_documentation=False), 4)
    config = response.results[0].configs[0]
    return config.value, config.config_source


def test_a_cluster_default_broker_config_changed_through_one_node_applies_on_all(kafka_cluster):
    """log.retention.ms for the cluster default ("") through node 2: every node describes itself with it
    as DYNAMIC_DEFAULT_BROKER_CONFIG, node 1 also after a restart; node 3's own override (through node 3)
    wins there only, as DynamicBrokerConfig's precedence says; deleting the default through node 1 leaves
    node 3's own."""
    cluster = kafka_cluster
    assert _alter(cluster, 2, "", [("log.retention.ms", SET, "7777")], BROKER) is ErrorCode.NONE
    assert _broker_config(cluster, 2, "log.retention.ms") == ("7777", DYNAMIC_DEFAULT_BROKER_CONFIG)
    for via in (1, 3):
        wait_until(lambda v=via: _broker_config(cluster, v, "log.retention.ms") ==
                   ("7777", DYNAMIC_DEFAULT_BROKER_CONFIG), 10, f"node {via} taking the default")
    cluster.kill(1)
    cluster.restart(1)
    assert _broker_config(cluster, 1, "log.retention.ms") == ("7777", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert _alter(cluster, 3, "3", [("log.retention.ms", SET, "8888")], BROKER) is ErrorCode.NONE
    assert _broker_config(cluster, 3, "log.retention.ms") == ("8888", DYNAMIC_BROKER_CONFIG)
    assert _alter(cluster, 1, "", [("log.retention.ms", DELETE, None)], BROKER) is ErrorCode.NONE
    for via in (1, 2):
        wait_until(lambda v=via: _broker_config(cluster, v, "log.retention.ms")[1] not in
                   (DYNAMIC_DEFAULT_BROKER_CONFIG, DYNAMIC_BROKER_CONFIG), 10, f"node {via} dropping the default")
    assert _broker_config(cluster, 3, "log.retention.ms") == ("8888", DYNAMIC_BROKER_CONFIG)


def test_a_broker_config_change_opens_no_log_a_node_does_not_hold(kafka_cluster):
    """A changed broker default reaches the logs a node has open, and creates none: with one partition on
    each node, after the change every node still has only its own partition's directory. Kafka: a
    DynamicBrokerConfig reconfiguration (DynamicLogConfig.updateLogsConfig) updates the LogManager's
    current logs (LogManager.allLogs); only a replica assignment (ReplicaManager.applyDelta) makes one."""
    cluster = kafka_cluster
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("spread", replica_assignments={0: [1], 1: [2], 2: [3]})])
    finally:
        admin.close()
    for partition, node in enumerate((1, 2, 3)):
        cluster.wait_isr("spread", partition, 1)
        wait_until(lambda n=node, p=partition: (cluster.data_dir(n) / f"spread-{p}").is_dir(), 10,
                   f"node {node} opening spread-{partition}")
    assert _alter(cluster, 2, "", [("log.retention.ms", SET, "7777")], BROKER) is ErrorCode.NONE
    for via in (1, 3):
        wait_until(lambda v=via: _broker_config(cluster, v, "log.retention.ms") ==
                   ("7777", DYNAMIC_DEFAULT_BROKER_CONFIG), 10, f"node {via} taking the default")
    for partition, node in enumerate((1, 2, 3)):
        held = sorted(d.name for d in cluster.data_dir(node).glob("spread-*"))
        assert held == [f"spread-{partition}"], (node, held)


GROUP, DYNAMIC_GROUP_CONFIG = 32, 8


def _group_config(cluster, via: int, group: str, key: str) -> tuple[str, int]:
    return _broker_config(cluster, via, key, GROUP, group)


@pytest.mark.kcoord_shared_cluster
def test_a_group_config_changed_through_one_node_is_seen_by_every_node(kafka_cluster):
    """consumer.session.timeout.ms of group `g/1` (a `/` in its id) through node 1: every node describes
    it as DYNAMIC_GROUP_CONFIG (so the group's coordinator, wherever `__consumer_offsets` leads, reads it:
    GroupConfigManager follows the metadata on every broker); deleted through node 3, gone everywhere."""
    cluster = kafka_cluster
    assert _alter(cluster, 1, "g/1", [("consumer.session.timeout.ms", SET, "50000")], GROUP) is ErrorCode.NONE
    assert _group_config(cluster, 1, "g/1", "consumer.session.timeout.ms") == ("50000", DYNAMIC_GROUP_CONFIG)
    for via in (2, 3):
        wait_until(lambda v=via: _group_config(cluster, v, "g/1", "consumer.session.timeout.ms") ==
                   ("50000", DYNAMIC_GROUP_CONFIG), 10, f"node {via} describing the group config")
    assert _alter(cluster, 3, "g/1", [("consumer.session.timeout.ms", DELETE, None)], GROUP) is ErrorCode.NONE
    for via in (1, 2, 3):
        wait_until(lambda v=via: _group_config(cluster, v, "g/1", "consumer.session.timeout.ms")[1]
                   != DYNAMIC_GROUP_CONFIG, 10, f"node {via} dropping the group config")


@pytest.mark.kcoord_shared_cluster
def test_changes_to_one_resource_through_three_nodes_at_once_all_land(kafka_cluster):
    """Three incremental changes of different keys of one group's configs, sent through nodes 1, 2 and 3 at the
    same instant, six rounds: every change is in the result on every node. Each node computes the resource's
    new set from its copy; a write whose copy another node's write overtook is refused by etcd and computed
    again (PrefixFollower.write_on_copy), as Kafka's controller applies them one after the other
    (ConfigurationControlManager.incrementalAlterConfigs). A plain put of each node's set lost changes."""
    import threading

    cluster = kafka_cluster
    keys = {1: ("share.auto.offset.reset", ("latest", "earliest")),
            2: ("share.isolation.level", ("read_uncommitted", "read_committed")),
            3: ("streams.num.standby.replicas", ("0", "2"))}
    for round_ in range(6):
        barrier = threading.Barrier(3)
        codes: dict[int, ErrorCode] = {}

        def change(via: int, r: int = round_, gate: threading.Barrier = barrier,
                   out: dict[int, ErrorCode] = codes) -> None:
            key, values = keys[via]
            gate.wait()
            out[via] = _alter(cluster, via, "racing", [(key, SET, values[r % 2])], GROUP)

        threads = [threading.Thread(target=change, args=(via,)) for via in keys]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert codes == dict.fromkeys(keys, ErrorCode.NONE)
        for via in keys:
            wait_until(lambda v=via, r=round_: all(_group_config(cluster, v, "racing", key)[0] == values[r % 2]
                                                   for key, values in keys.values()),
                       10, f"node {via} describing round {round_}'s three changes")
