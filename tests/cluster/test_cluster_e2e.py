"""A 3-node kcoord cluster on a real etcd, end to end over TCP with real clients (issue #26): topics with
replication factor 3, Metadata / DescribeCluster / kcat as Kafka answers them, INVALID_REPLICATION_FACTOR,
and a SIGKILLed node's partitions failing over once its lease expires (2 s sessions here).

Replication's data plane is not here yet (kcoord.cluster.replica_manager): these tests look at the
cluster's metadata, not at records."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.cluster.replication_checks import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120),
              pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000)]


def _partitions(cluster, topic: str):
    [t] = cluster.metadata(topics=[topic]).topics
    return {p.partition_index: p for p in t.partitions}


def _create(admin, name: str, partitions: int = 6, rf: int = 3):
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic(name, partitions, rf)])


@pytest.mark.kcoord_shared_cluster
def test_rf3_topic_has_leaders_spread_and_full_isrs(kafka_cluster, admin):
    _create(admin, "events")
    parts = wait_until(lambda: (p := _partitions(kafka_cluster, "events")) and len(p) == 6 and p, 10, "6 partitions")
    assert {p.leader_id for p in parts.values()} == {1, 2, 3}
    for p in parts.values():
        assert sorted(p.replica_nodes) == [1, 2, 3] and sorted(p.isr_nodes) == [1, 2, 3]
        assert p.offline_replicas == [] and p.error_code == 0
    # every node answers the same (each follows the metadata)
    for node_id in (1, 2, 3):
        assert {i: p.leader_id for i, p in _partitions_via(kafka_cluster, node_id, "events").items()} == \
            {i: p.leader_id for i, p in parts.items()}


def _partitions_via(cluster, node_id: int, topic: str):
    def ready():
        [t] = cluster.metadata(via=node_id, topics=[topic]).topics
        return {p.partition_index: p for p in t.partitions} if len(t.partitions) == 6 else None

    return wait_until(ready, 10, f"node {node_id} sees {topic}")


@pytest.mark.kcoord_shared_cluster
def test_kafka_python_and_confluent_metadata_and_describe_cluster(kafka_cluster, admin):
    from confluent_kafka.admin import AdminClient

    _create(admin, "seen")
    described = admin.describe_cluster()
    assert sorted(b.get("node_id", b.get("broker_id")) for b in described["brokers"]) == [1, 2, 3]
    controller = described["controller_id"]
    assert controller in (1, 2, 3)
    assert kafka_cluster.metadata().controller_id == controller

    confluent = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    md = wait_until(lambda: (m := confluent.list_topics(timeout=10)) and "seen" in m.topics
               and len(m.topics["seen"].partitions) == 6 and m, 10, "confluent sees the topic")
    assert sorted(md.brokers) == [1, 2, 3]
    assert md.controller_id == controller
    parts = md.topics["seen"].partitions
    assert {p.leader for p in parts.values()} == {1, 2, 3}
    assert all(sorted(p.isrs) == [1, 2, 3] and sorted(p.replicas) == [1, 2, 3] for p in parts.values())
    cluster = confluent.describe_cluster(request_timeout=10).result()
    assert sorted(n.id for n in cluster.nodes) == [1, 2, 3] and cluster.controller.id == controller


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.kcoord_shared_cluster
def test_kcat_lists_the_cluster(kafka_cluster, admin):
    _create(admin, "listed")
    wait_until(lambda: len(_partitions(kafka_cluster, "listed")) == 6, 10, "the topic")
    out = subprocess.run(["kcat", "-b", kafka_cluster.bootstrap_servers, "-L", "-J", "-t", "listed"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    doc = json.loads(out)
    assert sorted(b["id"] for b in doc["brokers"]) == [1, 2, 3]
    [topic] = doc["topics"]
    assert len(topic["partitions"]) == 6
    assert {p["leader"] for p in topic["partitions"]} == {1, 2, 3}
    assert all(sorted(r["id"] for r in p["isrs"]) == [1, 2, 3] for p in topic["partitions"])


@pytest.mark.kcoord_shared_cluster
def test_replication_factor_above_the_brokers_is_refused(kafka_cluster, admin):
    from kafka.errors import InvalidReplicationFactorError

    with pytest.raises(InvalidReplicationFactorError) as info:
        _create(admin, "too-many", 1, 4)
    assert "4" in str(info.value)
    assert kafka_cluster.metadata(topics=["too-many"]).topics[0].error_code != 0


@pytest.mark.kcoord_shared_cluster
def test_create_topics_on_a_node_that_is_not_the_controller_is_not_controller(kafka_cluster):
    from kcoord.protocol import messages as m
    from kcoord.protocol.client import KafkaWireClient

    controller = kafka_cluster.metadata().controller_id
    other = next(i for i in (1, 2, 3) if i != controller)
    R = m.CreateTopicsRequest
    with KafkaWireClient.connect(kafka_cluster.nodes[other].bootstrap_servers) as client:
        resp = client.request(R(topics=[R.CreatableTopic(name="x", num_partitions=1, replication_factor=1,
                                                         assignments=[], configs=[])],
                                timeout_ms=5000, validate_only=False), version=5)
    assert resp.topics[0].error_code == 41  # NOT_CONTROLLER


def test_sigkill_moves_leaders_with_bumped_epochs_then_restart_registers_anew(kafka_cluster, admin):
    _create(admin, "failover")
    before = wait_until(lambda: (p := _partitions(kafka_cluster, "failover")) and len(p) == 6 and p, 10, "the topic")
    victim = 2
    led = {i for i, p in before.items() if p.leader_id == victim}
    assert led
    kafka_cluster.kill(victim)
    survivor = 1 if victim != 1 else 3

    def moved():
        parts = {i: p for i, p in _partitions_via_running(kafka_cluster, survivor).items()}
        return parts if all(parts[i].leader_id not in (victim, -1) for i in led) and \
            all(victim not in p.isr_nodes for p in parts.values()) else None

    after = wait_until(moved, 15, "the killed node's partitions get new leaders")
    for i in led:
        assert after[i].leader_epoch > before[i].leader_epoch
    for p in after.values():
        assert p.offline_replicas == [victim]
    assert sorted(b.node_id for b in kafka_cluster.metadata(via=survivor).brokers) == [1, 3]

    kafka_cluster.restart(victim)
    kafka_cluster.wait_registered({1, 2, 3}, timeout=20, via=survivor)
    log = kafka_cluster.nodes[victim].log_text()
    epochs = [int(x) for x in re.findall(rf"broker {victim} registered with epoch (\d+)", log)]
    assert len(epochs) == 2 and epochs[1] > epochs[0]
    # registered again: no longer offline (rejoining the ISRs is the leaders' work: replication's data plane)
    wait_until(lambda: all(q.offline_replicas == [] for q in _partitions_via_running(kafka_cluster, survivor).values()),
          10, "its replicas are online again")


def _partitions_via_running(cluster, node_id: int):
    [t] = cluster.metadata(via=node_id, topics=["failover"]).topics
    return {p.partition_index: p for p in t.partitions}


@pytest.mark.kcoord_shared_cluster
def test_find_coordinator_names_the_leader_of_the_group_partition(kafka_cluster):
    """__consumer_offsets is created through the controller with offsets.topic.replication.factor (3)
    on the first FindCoordinator (COORDINATOR_NOT_AVAILABLE meanwhile), then every node names the
    leader of the group's partition."""
    from kcoord.protocol import messages as m
    from kcoord.protocol.client import KafkaWireClient

    def find(node_id: int):
        with KafkaWireClient.connect(kafka_cluster.nodes[node_id].bootstrap_servers) as client:
            return client.request(m.FindCoordinatorRequest(key="g", key_type=0), version=3)

    first = find(1)
    assert first.error_code in (0, 15)  # NONE, or COORDINATOR_NOT_AVAILABLE while the topic is created
    answer = wait_until(lambda: (r := find(3)).error_code == 0 and r, 15, "a coordinator")
    [offsets] = kafka_cluster.metadata(topics=["__consumer_offsets"]).topics
    assert offsets.is_internal and len(offsets.partitions[0].replica_nodes) == 3
    assert answer.node_id == offsets.partitions[0].leader_id
    assert all(find(i).node_id == answer.node_id for i in (1, 2, 3))


def test_a_node_paused_past_its_lease_steps_down_and_registers_again(kafka_cluster):
    kafka_cluster.pause(3)
    try:
        kafka_cluster.wait_registered({1, 2}, timeout=15, via=1)
    finally:
        kafka_cluster.resume(3)
    kafka_cluster.wait_registered({1, 2, 3}, timeout=15, via=1)
    node = kafka_cluster.nodes[3]
    node.wait_for_log(r"node 3 registered again with broker epoch \d+", timeout=10)
    epochs = [int(x) for x in re.findall(r"broker 3 registered with epoch (\d+)", node.log_text())]
    assert len(epochs) == 2 and epochs[1] > epochs[0]
