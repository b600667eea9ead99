"""KIP-714 client telemetry over TCP with librdkafka (confluent-kafka, `enable.metrics.push=true`): with the
receiver on, the producer's pushed metrics show at /metrics, in `kcoord clients` and through the fixture;
with it off, ApiVersions lists neither API and the client never calls them.

Kafka advertises GetTelemetrySubscriptions / PushTelemetry only with a telemetry receiver configured
(core/src/main/scala/kafka/server/ApiVersionManager.scala, DefaultApiVersionManager.apiVersionResponse:
clientTelemetryEnabled); librdkafka starts its telemetry only when the broker lists them
(rdkafka_telemetry.c).
"""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid

import pytest
from confluent_kafka import Producer

from kcoord.protocol import messages as m
from kcoord.protocol.telemetry_export import EXPORT_DIR
from kcoord.testkit.waiting import wait_until
from tests.support.raw_kafka import RawKafka

ON = {"kcoord.client.telemetry.enable": "true", "kcoord.client.telemetry.push.interval.ms": "300",
      "metrics.port": "0"}
LATENCY = "org.apache.kafka.producer.node.request.latency.avg"


def advertised_keys(port: int) -> set[int]:
    with RawKafka(port) as c:
        c.send_request(18, 3, m.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        frame = c.read_frame()
    resp, _ = m.response_codec(18, 3).decode(frame, 4)
    return {a.api_key for a in resp.api_keys}


def produce_some(bootstrap: str, client_id: str, until) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "enable.metrics.push": True,
                         "linger.ms": 0})
    try:
        delivered = []
        def poll():
            producer.produce("telemetry-topic", b"x", on_delivery=lambda err, msg: delivered.append(err))
            producer.flush(5)
            return until()
        wait_until(poll, 30, "the producer's telemetry to arrive")
        assert delivered and all(err is None for err in delivered)
    finally:
        producer.flush(5)


def exported(broker) -> list[dict]:
    directory = broker.data_dir / EXPORT_DIR
    if not directory.exists():
        return []
    return [json.loads(line) for path in sorted(directory.glob("*.jsonl")) for line in path.read_text().splitlines()
            if line.endswith("}")]


def metrics_text(broker) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics").read().decode()


@pytest.mark.kcoord(overrides=ON)
def test_librdkafka_pushes_its_metrics_where_users_look(kafka_broker):
    assert {71, 72} <= advertised_keys(kafka_broker.port)
    produce_some(kafka_broker.bootstrap_servers, "telemetry-app",
                 lambda: any(k.startswith(LATENCY) for k in kafka_broker.client_metrics(client_id="telemetry-app")))
    metrics = kafka_broker.client_metrics(client_id="telemetry-app")
    assert any(name.startswith("org.apache.kafka.producer.") for name in metrics), metrics
    [instance] = kafka_broker.clients(client_id="telemetry-app")
    assert instance["client_software_name"] == "confluent-kafka-python"
    assert instance["pushes"] >= 1 and instance["requested_metrics"] == ["*"]
    uuid.UUID(instance["client_instance_id"])

    text = metrics_text(kafka_broker)
    assert f'kcoord_client_{LATENCY.replace(".", "_")}{{client_id="telemetry-app"' in text
    cli = subprocess.run([sys.executable, "-m", "kcoord", "clients", "metrics", "--client-id", "telemetry-app",
                          "--admin", kafka_broker.admin_url], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert LATENCY in cli.stdout and "telemetry-app" in cli.stdout
    listing = subprocess.run([sys.executable, "-m", "kcoord", "clients", "list", "--admin", kafka_broker.admin_url],
                             capture_output=True, text=True, timeout=60)
    assert instance["client_instance_id"] in listing.stdout

    # ... and in the export the analytics read (broker/telemetry_export.py), written within a second or so
    wait_until(lambda: any(line["client_instance_id"] == instance["client_instance_id"]
                           for line in exported(kafka_broker)), 30, "the push to be exported")


@pytest.mark.kcoord(overrides={"metrics.port": "0"})
def test_with_telemetry_off_nothing_is_advertised_and_the_client_is_unaffected(kafka_broker):
    assert not {71, 72} & advertised_keys(kafka_broker.port)
    sent = []
    produce_some(kafka_broker.bootstrap_servers, "quiet-app", lambda: sent.append(1) or len(sent) >= 3)
    text = metrics_text(kafka_broker)
    assert 'api="Produce"' in text
    assert "GetTelemetrySubscriptions" not in text and "PushTelemetry" not in text
    assert kafka_broker.clients() == []
    assert not (kafka_broker.data_dir / EXPORT_DIR).exists()


def alter_client_metrics(port: int, name: str, **configs: str):
    R = m.IncrementalAlterConfigsRequest
    with RawKafka(port) as c:
        c.send_request(44, 1, R(validate_only=False, resources=[R.AlterConfigsResource(
            resource_type=16, resource_name=name, configs=[R.AlterableConfig(
                name=k.replace("_", "."), config_operation=0, value=v) for k, v in configs.items()])]))
        frame = c.read_frame()
    resp, _ = m.response_codec(44, 1).decode(frame, 5)
    return [(r.error_code, r.error_message) for r in resp.responses]


def test_defining_a_client_metrics_resource_turns_telemetry_on_durably(kafka_broker):
    """A CLIENT_METRICS resource is a subscription (ClientMetricsManager.updateSubscription, validated by
    ClientMetricsConfigs.validate); kcoord takes defining one as turning its receiver on. It is kept in
    log.dirs, listed by ListConfigResources v0 and described by DescribeConfigs."""
    assert not {71, 72} & advertised_keys(kafka_broker.port)
    assert alter_client_metrics(kafka_broker.port, "bad", interval_ms="50") == [
        (42, "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)")]
    assert alter_client_metrics(kafka_broker.port, "producers", metrics="org.apache.kafka.producer.",
                                interval_ms="200") == [(0, None)]
    kafka_broker.restart()
    assert {71, 72} <= advertised_keys(kafka_broker.port)
    with RawKafka(kafka_broker.port) as c:
        c.send_request(74, 0, m.ListConfigResourcesRequest(resource_types=[]))
        frame = c.read_frame()
        listed, _ = m.response_codec(74, 0).decode(frame, 5)
        c.send_request(32, 4, m.DescribeConfigsRequest(resources=[m.DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=16, resource_name="producers", configuration_keys=None)], include_synonyms=False,
            include_documentation=False))
        frame = c.read_frame()
        described, _ = m.response_codec(32, 4).decode(frame, 5)
    assert [r.resource_name for r in listed.config_resources] == ["producers"]
    assert {e.name: (e.value, e.config_source) for e in described.results[0].configs} == {
        "metrics": ("org.apache.kafka.producer.", 7), "interval.ms": ("200", 7), "match": ("", 5)}
    produce_some(kafka_broker.bootstrap_servers, "subscribed-app",
                 lambda: any(k.startswith(LATENCY) for k in kafka_broker.client_metrics(client_id="subscribed-app")))
    [instance] = kafka_broker.clients(client_id="subscribed-app")
    assert instance["requested_metrics"] == ["org.apache.kafka.producer."] and instance["push_interval_ms"] == 200
    assert all(p["name"].startswith("org.apache.kafka.producer.") for p in instance["metrics"])


@pytest.mark.kcoord(overrides=ON)
def test_a_group_consumer_reports_its_own_rebalance_latency(kafka_broker):
    """librdkafka's consumer pushes KIP-714's consumer metrics (org.apache.kafka.consumer.coordinator.*, the
    KIP's list): the rebalance the broker coordinated, as the member saw it."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "telemetry-group",
                         "client.id": "telemetry-consumer", "enable.metrics.push": True,
                         "auto.offset.reset": "earliest"})
    try:
        produce_some(kafka_broker.bootstrap_servers, "topic-maker", lambda: True)   # the topic exists
        consumer.subscribe(["telemetry-topic"])

        def rebalance_reported():
            consumer.poll(0.2)
            pushed = kafka_broker.client_metrics(client_id="telemetry-consumer")
            return pushed.get("org.apache.kafka.consumer.coordinator.rebalance.latency.max", 0) > 0
        wait_until(rebalance_reported, 30, "the consumer's rebalance latency to be pushed")
    finally:
        consumer.close()
    names = kafka_broker.client_metrics(client_id="telemetry-consumer")
    print("\n" + "\n".join(f"{n} = {v:g}" for n, v in sorted(names.items())))
    assert any(n.startswith("org.apache.kafka.consumer.") for n in names), names
