"""Client telemetry's rules (KIP-714) in process, with an injected clock: instance ids, subscription ids,
push intervals, the errors Kafka answers, the OTLP decode and what the receiver keeps.

Each rule follows Kafka's ClientMetricsManager (server/src/main/java/org/apache/kafka/server/
ClientMetricsManager.java) and ClientMetricsInstance (.../server/metrics/ClientMetricsInstance.java); the
test names the method."""
from __future__ import annotations

import gzip
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.broker.client_telemetry import ClientInfo, ClientTelemetry, subscription_id
from kcoord.metadata.client_metrics_configs import (
    ClientMetricsConfigInvalid,
    ClientMetricsConfigStore,
    parse_subscription,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.otlp import OtlpError, decode_metrics_data
from kcoord.protocol.records import GZIP, NONE, ZSTD, compress
from tests.support import otlp_encode as pb

CLIENT = ClientInfo("app-1", "librdkafka", "2.16.1", "127.0.0.1", 50000)
ZERO = uuid.UUID(int=0)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def telemetry(subscriptions=(), enabled=True, interval=1000, max_bytes=1 << 20):
    clock = Clock()
    subs = list(subscriptions)
    t = ClientTelemetry(clock, lambda: subs, enabled=enabled, max_bytes=max_bytes, default_interval_ms=interval)
    return t, clock, subs


def payload(value: float = 3.5) -> bytes:
    return pb.metrics_data(
        pb.gauge("org.apache.kafka.producer.node.request.latency.avg", pb.number_point(value, {"node_id": 1})),
        pb.monotonic_sum("org.apache.kafka.producer.connection.creation.total", pb.number_point(4)),
        pb.histogram("org.apache.kafka.client.rtt", 7, 21.0),
        resource={"client_rack": "r1"})


def test_otlp_decode_reads_gauges_sums_and_histograms():
    data = decode_metrics_data(payload())
    by_name = {p.metric: p for p in data.points}
    latency = by_name["org.apache.kafka.producer.node.request.latency.avg"]
    assert (latency.kind, latency.value, latency.attributes) == ("gauge", 3.5, (("node_id", "1"),))
    total = by_name["org.apache.kafka.producer.connection.creation.total"]
    assert (total.kind, total.value, total.monotonic) == ("sum", 4.0, True)
    rtt = by_name["org.apache.kafka.client.rtt"]
    assert (rtt.count, rtt.value) == (7, 21.0)
    assert data.resource == {"client_rack": "r1"}


@pytest.mark.parametrize("garbage", [b"\x0a\x05ab", b"\x0a", b"\x0f\x00", b"\x0a\x02\x08"])
def test_otlp_decode_refuses_truncated_or_malformed_payloads(garbage):
    with pytest.raises(OtlpError):
        decode_metrics_data(garbage)


def test_first_request_gets_a_new_instance_id_and_the_subscription():
    """processGetTelemetrySubscriptionRequest: a zero id is replaced by a fresh one; createClientInstance."""
    t, _, _ = telemetry()
    answer = t.get_subscriptions(ZERO, CLIENT)
    assert answer.error == ErrorCode.NONE and answer.client_instance_id != ZERO
    assert answer.requested_metrics == ("*",) and answer.push_interval_ms == 1000
    assert answer.subscription_id == subscription_id(("*",), 1000, answer.client_instance_id)


def test_asking_again_before_the_interval_is_throttled():
    """validateGetRequest / maybeUpdateGetRequestTimestamp: THROTTLING_QUOTA_EXCEEDED before the interval."""
    t, clock, _ = telemetry()
    first = t.get_subscriptions(ZERO, CLIENT)
    assert t.get_subscriptions(first.client_instance_id, CLIENT).error == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.ms += 1000
    assert t.get_subscriptions(first.client_instance_id, CLIENT).error == ErrorCode.NONE


def test_push_rules_in_kafkas_order():
    """validatePushRequest: throttled before the interval, then unknown subscription id, compression, size."""
    t, clock, _ = telemetry(max_bytes=10_000)
    sub = t.get_subscriptions(ZERO, CLIENT)
    iid, sid = sub.client_instance_id, sub.subscription_id
    assert t.push(iid, sid, False, NONE, payload(), CLIENT) == ErrorCode.NONE  # first push after a get: due
    assert t.push(iid, sid, False, NONE, payload(), CLIENT) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.ms += 1000
    assert t.push(iid, sid + 1, False, NONE, payload(), CLIENT) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    clock.ms += 1000
    assert t.push(iid, sid, False, 9, payload(), CLIENT) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    clock.ms += 1000
    assert t.push(iid, sid, False, NONE, b"\x00" * 10_001, CLIENT) == ErrorCode.TELEMETRY_TOO_LARGE
    clock.ms += 1000
    assert t.push(iid, sid, False, NONE, b"\x0a\x05ab", CLIENT) == ErrorCode.INVALID_RECORD  # receiver fails
    assert t.push(uuid.UUID(int=1), sid, False, NONE, b"", CLIENT) == ErrorCode.INVALID_REQUEST  # reserved


def test_an_unknown_subscription_id_lets_the_client_ask_again_at_once():
    """KIP-714: after UNKNOWN_SUBSCRIPTION_ID the client re-requests its subscription without waiting."""
    t, clock, _ = telemetry()
    sub = t.get_subscriptions(ZERO, CLIENT)
    clock.ms += 1000
    assert t.push(sub.client_instance_id, 42, False, NONE, b"", CLIENT) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    assert t.get_subscriptions(sub.client_instance_id, CLIENT).error == ErrorCode.NONE


def test_a_terminating_push_is_accepted_early_and_is_the_last():
    """validatePushRequest: terminating skips the interval check; anything after it is INVALID_REQUEST."""
    t, clock, _ = telemetry()
    sub = t.get_subscriptions(ZERO, CLIENT)
    iid, sid = sub.client_instance_id, sub.subscription_id
    assert t.push(iid, sid, False, NONE, payload(), CLIENT) == ErrorCode.NONE
    assert t.push(iid, sid, True, NONE, payload(), CLIENT) == ErrorCode.NONE
    clock.ms += 5000
    assert t.push(iid, sid, False, NONE, payload(), CLIENT) == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("codec", [GZIP, ZSTD])
def test_compressed_pushes_are_decoded_and_kept_per_instance(codec):
    t, clock, _ = telemetry()
    sub = t.get_subscriptions(ZERO, CLIENT)
    assert t.push(sub.client_instance_id, sub.subscription_id, False, codec, compress(codec, payload(2.0)),
                  CLIENT) == ErrorCode.NONE
    clock.ms += 1000
    assert t.push(sub.client_instance_id, sub.subscription_id, False, codec, compress(codec, payload(9.0)),
                  CLIENT) == ErrorCode.NONE
    [instance] = t.instances("app-1")
    assert instance.pushes == 2
    values = {(p.metric, p.attributes): p.value for p in instance.points.values()}
    assert values[("org.apache.kafka.producer.node.request.latency.avg", (("node_id", "1"),))] == 9.0
    assert t.instances("someone-else") == []
    text = "\n".join(t.prometheus_lines())
    assert ('kcoord_client_org_apache_kafka_producer_node_request_latency_avg{client_id="app-1",'
            f'client_instance_id="{sub.client_instance_id}",node_id="1"}} 9') in text
    assert "# TYPE kcoord_client_org_apache_kafka_producer_connection_creation_total counter" in text
    assert gzip.decompress(compress(GZIP, b"x")) == b"x"  # the test's own check of the codec it used


def test_subscriptions_select_clients_by_their_match_patterns_and_take_the_smallest_interval():
    """createClientInstance: every matching subscription's metrics, the lowest interval; isMatch needs all."""
    subs = [parse_subscription("producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000",
                                             "match": "client_software_name=librdkafka,client_id=app-.*"}),
            parse_subscription("rtt", {"metrics": "org.apache.kafka.client.rtt", "interval.ms": "500"}),
            parse_subscription("java", {"metrics": "*", "match": "client_software_name=apache-kafka-java"})]
    t, _, _ = telemetry(subs, enabled=False)
    answer = t.get_subscriptions(ZERO, CLIENT)
    assert answer.requested_metrics == ("org.apache.kafka.client.rtt", "org.apache.kafka.producer.")
    assert answer.push_interval_ms == 500
    other = t.get_subscriptions(ZERO, ClientInfo("x", "librdkafka", "2", "127.0.0.1", 1))
    assert other.requested_metrics == ("org.apache.kafka.client.rtt",)


def test_no_subscription_and_receiver_off_means_nothing_requested_and_not_enabled():
    t, _, _ = telemetry(enabled=False)
    assert not t.enabled
    assert t.get_subscriptions(ZERO, CLIENT).requested_metrics == ()


def test_a_changed_subscription_reaches_the_instance_on_its_next_request(tmp_path):
    """updateSubscription bumps the version; clientInstance re-evaluates an instance older than it."""
    store = ClientMetricsConfigStore(str(tmp_path))
    t = ClientTelemetry(Clock(), store.subscriptions, enabled=False, max_bytes=1000, default_interval_ms=1000)
    store.on_change = t.subscriptions_changed
    first = t.get_subscriptions(ZERO, CLIENT)
    assert first.requested_metrics == () and not t.enabled
    store.replace("all", {"metrics": "*", "interval.ms": "100"})
    assert t.enabled
    again = t.get_subscriptions(first.client_instance_id, CLIENT)  # not throttled: a fresh instance state
    assert (again.error, again.requested_metrics, again.push_interval_ms) == (ErrorCode.NONE, ("*",), 100)
    assert again.subscription_id != first.subscription_id
    assert ClientMetricsConfigStore(str(tmp_path)).names() == ["all"]  # durable


def test_instances_expire_after_three_intervals_or_a_minute():
    t, clock, _ = telemetry(interval=30_000)
    t.get_subscriptions(ZERO, CLIENT)
    clock.ms += 89_999
    assert len(t.instances()) == 1
    clock.ms += 1
    assert t.instances() == []


@pytest.mark.parametrize(("configs", "code"), [
    ({"metric": "*"}, "INVALID_REQUEST"),
    ({"interval.ms": "99"}, "INVALID_REQUEST"),
    ({"interval.ms": "3600001"}, "INVALID_REQUEST"),
    ({"interval.ms": "ten"}, "INVALID_CONFIG"),
    ({"match": "client_colour=red"}, "INVALID_CONFIG"),
    ({"match": "client_id=("}, "INVALID_CONFIG"),
])
def test_bad_subscriptions_are_refused_as_kafka_refuses_them(configs, code):
    """ClientMetricsConfigs.validate / parseMatchingPatterns."""
    with pytest.raises(ClientMetricsConfigInvalid) as exc:
        parse_subscription("s", configs)
    assert exc.value.code_name == code


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300) | st.builds(lambda cut, junk: payload()[:cut] + junk,
                                          st.integers(0, 400), st.binary(max_size=20)))
def test_otlp_decode_of_any_bytes_decodes_or_says_why(data):
    """A push's payload is the client's: whatever it is, the decoder returns data points or raises OtlpError
    (PushTelemetry answers INVALID_RECORD), never another exception."""
    try:
        decode_metrics_data(data)
    except OtlpError:
        pass
