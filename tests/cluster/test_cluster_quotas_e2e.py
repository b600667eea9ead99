"""Client quotas and CLIENT_METRICS subscriptions are the cluster's (issue #29 on issue #26's cluster): 3 real
nodes on a real etcd. A producer_byte_rate quota altered through node 1 is described by nodes 2 and 3 and
enforced by node 2, the leader of the producer's partition (librdkafka's throttle_cb reports node 2's
throttle_time_ms), also after node 2's SIGKILL and restart (nothing of it is in its log.dirs); a
CLIENT_METRICS resource defined through node 1 is served by node 2's GetTelemetrySubscriptions.

Kafka: ClientQuotaControlManager.alterClientQuotas writes ClientQuotaRecords and every broker's
ClientQuotaMetadataManager (core/src/main/scala/kafka/server/metadata/ClientQuotaMetadataManager.scala:
handleUserClientQuotaChange) updates its quota managers from them; a CLIENT_METRICS ConfigRecord reaches
every broker's ClientMetricsManager (DynamicConfigPublisher.onMetadataUpdate's CLIENT_METRICS case ->
server/src/main/java/org/apache/kafka/server/ClientMetricsManager.java: updateSubscription). The
throttle is KafkaApis.handleProduceRequest's (quotas.produce.maybeRecordAndGetThrottleTimeMs)."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from tests.cluster.replication_checks import wait_until

# short quota windows, as tests/broker/quota/test_quota_e2e.py: the burst before throttling is one window's
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180), pytest.mark.kcoord_cluster(
    nodes=3, session_timeout_ms=2000, overrides={"quota.window.num": "2", "quota.window.size.seconds": "1"})]

QUOTA = 50_000  # producer_byte_rate, bytes a second
RECORD = b"x" * 10_000
CLIENT_METRICS, SET, DELETE = 16, 0, 1
GET_TELEMETRY_SUBSCRIPTIONS = 71


def _request(cluster, via: int, request, version: int):
    with KafkaWireClient.connect(cluster.nodes[via].bootstrap_servers, timeout=10) as wire:
        return wire.request(request, version)


def _set_quota(cluster, via: int, client_id: str, value: float | None) -> None:
    R = m.AlterClientQuotasRequest
    response = _request(cluster, via, R(validate_only=False, entries=[R.EntryData(
        entity=[R.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[R.OpData(key="producer_byte_rate", value=value or 0.0, remove=value is None)])]), 1)
    assert [(e.error_code, e.error_message) for e in response.entries] == [(ErrorCode.NONE, None)]


def _described(cluster, via: int) -> dict[str, dict[str, float]]:
    R = m.DescribeClientQuotasRequest
    response = _request(cluster, via, R(components=[R.ComponentData(entity_type="client-id", match_type=2, match=None)],
                                        strict=True), 1)
    assert response.error_code == ErrorCode.NONE
    return {e.entity[0].entity_name: {v.key: v.value for v in e.values} for e in response.entries}


def _throttles(bootstrap: str, client_id: str, records: int) -> list[tuple[int, float]]:
    """(broker id, seconds) of every throttle librdkafka reported while producing `records` records."""
    throttles: list[tuple[int, float]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "batch.size": 20_000,
                         "throttle_cb": lambda event: throttles.append((event.broker_id, event.throttle_time))})
    errors: list = []
    for _ in range(records):
        while True:
            try:
                producer.produce("quota-topic", RECORD, on_delivery=lambda err, _msg: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    return throttles


def test_a_quota_altered_through_one_node_is_described_and_enforced_by_the_others_and_survives_a_restart(
        kafka_cluster):
    """quota-topic's only replica is node 2; the quota goes through node 1, the producer bootstraps from
    node 1 only. Before the quota nothing is throttled; after it node 2 throttles (throttle_cb names
    broker 2); after node 2's SIGKILL + restart it still describes and enforces the quota; removed
    through node 3, it is gone everywhere."""
    from kafka.admin import KafkaAdminClient, NewTopic

    cluster = kafka_cluster
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("quota-topic", replica_assignments={0: [2]})])
    finally:
        admin.close()
    cluster.wait_isr("quota-topic", 0, 1)
    via_node_1 = cluster.nodes[1].bootstrap_servers
    assert [t for t in _throttles(via_node_1, "slow-app", 20) if t[1] > 0] == []

    _set_quota(cluster, 1, "slow-app", QUOTA)
    assert _described(cluster, 1) == {"slow-app": {"producer_byte_rate": float(QUOTA)}}  # read-your-writes
    for via in (2, 3):
        wait_until(lambda v=via: _described(cluster, v) == {"slow-app": {"producer_byte_rate": float(QUOTA)}}, 10,
                   f"node {via} describing the quota")
    throttled = [t for t in _throttles(via_node_1, "slow-app", 30) if t[1] > 0]
    assert throttled and {broker for broker, _s in throttled} == {2}, throttled

    cluster.kill(2)
    cluster.restart(2)
    cluster.wait_leader("quota-topic", 0)
    # what node 2 describes and enforces now came from the cluster: no node keeps it in its log.dirs
    assert [n for n in (1, 2, 3) if (cluster.data_dir(n) / "kcoord-client-quotas.json").exists()] == []
    assert _described(cluster, 2) == {"slow-app": {"producer_byte_rate": float(QUOTA)}}
    throttled = [t for t in _throttles(via_node_1, "slow-app", 30) if t[1] > 0]
    assert throttled and {broker for broker, _s in throttled} == {2}, throttled

    _set_quota(cluster, 3, "slow-app", None)
    for via in (1, 2, 3):
        wait_until(lambda v=via: _described(cluster, v) == {}, 10, f"node {via} dropping the quota")


def _alter_subscription(cluster, via: int, name: str, ops: list[tuple[str, int, str | None]]) -> None:
    R = m.IncrementalAlterConfigsRequest
    response = _request(cluster, via, R(resources=[R.AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=[R.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])],
        validate_only=False), 1)
    assert response.responses[0].error_code == ErrorCode.NONE, response.responses[0].error_message


def _subscription(cluster, via: int) -> tuple[int, tuple[str, ...]] | None:
    """(push interval, requested metrics) as node `via` answers GetTelemetrySubscriptions; None while the
    node does not advertise it (telemetry off there: no CLIENT_METRICS resource, no property)."""
    with KafkaWireClient.connect(cluster.nodes[via].bootstrap_servers, timeout=10) as wire:
        if GET_TELEMETRY_SUBSCRIPTIONS not in wire.api_versions():
            return None
        response = wire.request(m.GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)), 0)
    assert response.error_code == ErrorCode.NONE
    return response.push_interval_ms, tuple(response.requested_metrics)


@pytest.mark.kcoord_shared_cluster
def test_a_client_metrics_subscription_defined_through_one_node_is_served_by_another(kafka_cluster):
    """Telemetry is off on every node until the CLIENT_METRICS resource is defined through node 1; node 2
    then advertises GetTelemetrySubscriptions and answers with the resource's metrics and interval; deleted
    through node 3, node 2 stops advertising it (the cluster is left as it was)."""
    cluster = kafka_cluster
    assert _subscription(cluster, 2) is None
    _alter_subscription(cluster, 1, "producers", [("metrics", SET, "org.apache.kafka.producer."),
                                                  ("interval.ms", SET, "2000")])
    assert wait_until(lambda: _subscription(cluster, 2), 10, "node 2 serving the subscription") == (
        2000, ("org.apache.kafka.producer.",))
    _alter_subscription(cluster, 3, "producers", [("metrics", DELETE, None), ("interval.ms", DELETE, None)])
    wait_until(lambda: _subscription(cluster, 2) is None, 10, "node 2 dropping the subscription")
