"""A node whose log directory is cordoned (KIP-1066, `cordoned.log.dirs`) receives no new replica in a cluster:
3 real nodes on a real etcd. Node 2's directory is cordoned (IncrementalAlterConfigs on BROKER "2", through
node 2, kept in etcd); node 2 updates its registration, and the controller then places new partitions
on nodes 1 and 3 only, refusing a replication factor of 3 (INVALID_REPLICATION_FACTOR) until node 2 is
uncordoned. Kafka: the broker reports its cordoned directories in its registration and heartbeats, and the
controller's placer only uses brokers with a directory that is not cordoned (KIP-1066; metadata/.../controller/
ClusterControlManager and ReplicationControlManager.createTopic)."""
from __future__ import annotations

import itertools

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from tests.cluster.replication_checks import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000),
              pytest.mark.kcoord_shared_cluster]

BROKER, SET, DELETE = 4, 0, 1


def _cordon(cluster, node: int, value: str | None) -> ErrorCode:
    R = m.IncrementalAlterConfigsRequest
    op = SET if value is not None else DELETE
    # sent to the node itself, as the AdminClient routes a broker's own resource (ConfigAdminManager refuses
    # another node's id: validateResourceNameIsCurrentNodeId)
    with KafkaWireClient.connect(cluster.nodes[node].bootstrap_servers, timeout=10) as wire:
        response = wire.request(R(resources=[R.AlterConfigsResource(
            resource_type=BROKER, resource_name=str(node),
            configs=[R.AlterableConfig(name="cordoned.log.dirs", config_operation=op, value=value)])],
            validate_only=False), 1)
    return ErrorCode(response.responses[0].error_code)


def _create(cluster, name: str, partitions: int, rf: int) -> tuple[ErrorCode, str | None]:
    R = m.CreateTopicsRequest
    controller = cluster.metadata().controller_id  # clients send CreateTopics to the controller
    with KafkaWireClient.connect(cluster.nodes[controller].bootstrap_servers, timeout=10) as wire:
        response = wire.request(R(topics=[R.CreatableTopic(name=name, num_partitions=partitions,
                                                           replication_factor=rf, assignments=[], configs=[])],
                                  timeout_ms=10_000, validate_only=False), 5)
    topic = response.topics[0]
    return ErrorCode(topic.error_code), topic.error_message


def _replicas(cluster, name: str) -> set[int]:
    (topic,) = cluster.metadata(topics=[name]).topics
    return {node for p in topic.partitions for node in p.replica_nodes}


def test_no_new_replica_goes_to_a_cordoned_node_until_it_is_uncordoned(kafka_cluster):
    cluster = kafka_cluster
    assert _cordon(cluster, 2, "*") is ErrorCode.NONE
    try:
        # every node follows the change; node 2's registration then says it is cordoned (until then a topic
        # may still get replicas there)
        attempts = itertools.count()

        def placed_without_node_2() -> bool:
            name = f"spread-{next(attempts)}"
            assert _create(cluster, name, 6, 1)[0] is ErrorCode.NONE
            return 2 not in wait_until(lambda: _replicas(cluster, name) or None, 10, f"{name}'s replicas")

        wait_until(placed_without_node_2, 20, "new partitions placed without node 2")
        for name in ("after-a", "after-b"):
            assert _create(cluster, name, 6, 1)[0] is ErrorCode.NONE
            assert wait_until(lambda n=name: _replicas(cluster, n) or None, 10, name) <= {1, 3}
        code, message = _create(cluster, "three-copies", 1, 3)
        assert code is ErrorCode.INVALID_REPLICATION_FACTOR, message
    finally:
        assert _cordon(cluster, 2, None) is ErrorCode.NONE
    wait_until(lambda: _create(cluster, f"three-copies-{len(cluster.metadata().topics)}", 1, 3)[0]
               is ErrorCode.NONE, 20, "a replication factor of 3 once node 2 is uncordoned")
