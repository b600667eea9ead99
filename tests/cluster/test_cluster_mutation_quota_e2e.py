"""controller_mutation_rate (KIP-599) in cluster mode: 2 real nodes on a real etcd. The quota altered through
any node reaches the controller, which answers the mutations and keeps its own token buckets (per node, as
each Kafka broker keeps its own; ControllerApis on the active controller applies them). A topic the
controller then refuses for another reason gives its charge back, so it costs nothing (Kafka charges in
ReplicationControlManager.createTopic only after every other check); a node that is not the controller
answers NOT_CONTROLLER and charges nothing.

Kafka: core/src/main/scala/kafka/server/ControllerApis.scala handleCreateTopics / handleDeleteTopics /
handleCreatePartitions (strict from v6 / v5 / v3), metadata/src/main/java/org/apache/kafka/controller/
ReplicationControlManager.java createTopic / deleteTopic / createPartitions (applyPartitionChangeQuota)."""
from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from tests.cluster.replication_checks import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.kcoord_cluster(
    nodes=2, session_timeout_ms=2000, overrides={"controller.quota.window.num": "1"})]

MESSAGE = "The throttling quota has been exceeded."


def _request(cluster, via: int, request, version: int, client_id: str = "setup"):
    with KafkaWireClient.connect(cluster.nodes[via].bootstrap_servers, timeout=10, client_id=client_id) as wire:
        return wire.request(request, version)


def _controller(cluster) -> int:
    metadata = _request(cluster, 1, m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                      include_topic_authorized_operations=False), 12)
    return metadata.controller_id


def _create(cluster, via: int, client_id: str, topics: dict[str, tuple[int, int]]):
    R = m.CreateTopicsRequest
    response = _request(cluster, via, R(timeout_ms=10_000, validate_only=False, topics=[
        R.CreatableTopic(name=name, num_partitions=n, replication_factor=rf, assignments=[], configs=[])
        for name, (n, rf) in topics.items()]), 7, client_id)
    return {t.name: (t.error_code, t.error_message) for t in response.topics}, response.throttle_time_ms


def test_the_controller_enforces_the_quota_and_refunds_what_it_refuses(kafka_cluster):
    R = m.AlterClientQuotasRequest
    response = _request(kafka_cluster, 1, R(validate_only=False, entries=[R.EntryData(  # 1 a second, all clients
        entity=[R.EntityData(entity_type="client-id", entity_name=None)],
        ops=[R.OpData(key="controller_mutation_rate", value=1.0, remove=False)]), R.EntryData(  # but "setup"
        entity=[R.EntityData(entity_type="client-id", entity_name="setup")],
        ops=[R.OpData(key="controller_mutation_rate", value=1e6, remove=False)])]), 1)
    assert [e.error_code for e in response.entries] == [ErrorCode.NONE, ErrorCode.NONE]
    controller = wait_until(lambda: _controller(kafka_cluster) if _controller(kafka_cluster) > 0 else None, 30,
                            "a controller")
    other = next(n for n in kafka_cluster.nodes if n != controller)

    attempts = iter(range(1000))

    def follows_quota() -> bool:  # the default client-id's quota reached the controller: a burst of 1
        n = next(attempts)
        results, _ = _create(kafka_cluster, controller, f"probe{n}", {f"a{n}": (2, 1), f"b{n}": (1, 1)})
        return results[f"b{n}"][0] == ErrorCode.THROTTLING_QUOTA_EXCEEDED

    wait_until(follows_quota, 30, "the quota to reach the controller")

    # not the controller: NOT_CONTROLLER, nothing charged
    results, throttle = _create(kafka_cluster, other, "admin", {"t0": (4, 1)})
    assert results["t0"][0] == ErrorCode.NOT_CONTROLLER and throttle == 0
    # the controller refuses "bad" (replication factor 3 on 2 nodes) after the charge: it is given back,
    # so "t1" still finds the full bucket, and "t2" then one below zero
    results, throttle = _create(kafka_cluster, controller, "admin",
                                {"bad": (3, 3), "t1": (2, 1), "t2": (1, 1), "t3": (1, 1)})
    assert results["bad"][0] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert results["t1"] == (ErrorCode.NONE, None)
    assert results["t2"] == results["t3"] == (ErrorCode.THROTTLING_QUOTA_EXCEEDED, MESSAGE)
    assert throttle > 0

    # DeleteTopics v5 and CreatePartitions v3 on the controller are strict too (other clients' buckets)
    deleted = _request(kafka_cluster, controller, m.DeleteTopicsRequest(topic_names=["t1", "a0"],
                                                                        timeout_ms=10_000), 5, "deleter")
    assert [(r.name, r.error_code) for r in deleted.responses] == [
        ("t1", ErrorCode.NONE), ("a0", ErrorCode.THROTTLING_QUOTA_EXCEEDED)]
    assert deleted.throttle_time_ms > 0
    assert _create(kafka_cluster, controller, "setup", {"g1": (1, 1), "g2": (1, 1)})[0] == {
        "g1": (ErrorCode.NONE, None), "g2": (ErrorCode.NONE, None)}
    P = m.CreatePartitionsRequest
    grown = _request(kafka_cluster, controller, P(timeout_ms=10_000, validate_only=False, topics=[
        P.CreatePartitionsTopic(name="nope", count=9, assignments=None),   # unknown: not charged
        P.CreatePartitionsTopic(name="g1", count=3, assignments=None),     # 2 added: tokens -1
        P.CreatePartitionsTopic(name="g2", count=2, assignments=None)]), 3, "grower")
    assert [(r.name, r.error_code) for r in grown.results] == [
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("g1", ErrorCode.NONE),
        ("g2", ErrorCode.THROTTLING_QUOTA_EXCEEDED)]
    assert grown.throttle_time_ms > 0
