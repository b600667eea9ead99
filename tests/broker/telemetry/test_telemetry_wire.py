"""KIP-714's errors at the wire, one request at a time (RawKafka), as Kafka's ClientMetricsManager answers
them (server/src/main/java/org/apache/kafka/server/ClientMetricsManager.java: validateGetRequest,
validatePushRequest, processPushTelemetryRequest) and ClientMetricsInstance's interval checks."""
from __future__ import annotations

import uuid

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import GZIP, compress
from tests.support import otlp_encode as pb
from tests.support.raw_kafka import RawKafka

ZERO = uuid.UUID(int=0)


def call(c: RawKafka, key: int, body):
    c.send_request(key, 0, body)
    return m.response_codec(key, 0).decode(c.read_frame(), 5)[0]


def subscribe(c, instance=ZERO):
    return call(c, 71, m.GetTelemetrySubscriptionsRequest(client_instance_id=instance))


def push(c, sub, payload=b"", compression=0, terminating=False, subscription_id=None):
    return call(c, 72, m.PushTelemetryRequest(
        client_instance_id=sub.client_instance_id, terminating=terminating, compression_type=compression,
        subscription_id=sub.subscription_id if subscription_id is None else subscription_id, metrics=payload))


@pytest.mark.kcoord(overrides={"kcoord.client.telemetry.enable": "true", "telemetry.max.bytes": "2000",
                               "kcoord.client.telemetry.push.interval.ms": "600000"})
def test_telemetry_errors_at_the_wire(kafka_broker):
    with RawKafka(kafka_broker.port) as c:
        sub = subscribe(c)
        assert (sub.error_code, sub.requested_metrics, sub.push_interval_ms, sub.telemetry_max_bytes) == (
            ErrorCode.NONE, ["*"], 600000, 2000)
        assert sub.accepted_compression_types == [4, 3, 1, 2]      # zstd, lz4, gzip, snappy: Kafka's order
        assert subscribe(c, sub.client_instance_id).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED

        gauge = pb.metrics_data(pb.gauge("org.apache.kafka.producer.record.queue.time.avg", pb.number_point(1.25)))
        assert push(c, sub, compress(GZIP, gauge), GZIP).error_code == ErrorCode.NONE
        assert push(c, sub, gauge).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED   # before the interval
        # the errors checked after the interval: a terminating push skips it (validatePushRequest)
        assert push(c, sub, gauge, terminating=True, subscription_id=7).error_code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert push(c, sub, gauge).error_code == ErrorCode.INVALID_REQUEST  # nothing after a terminating push

        other = subscribe(c)
        assert push(c, other, gauge, compression=9, terminating=True).error_code == \
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        third = subscribe(c)
        assert push(c, third, b"\x00" * 2001, terminating=True).error_code == ErrorCode.TELEMETRY_TOO_LARGE
        fourth = subscribe(c)
        assert push(c, fourth, b"\x0a\x09garbage", terminating=True).error_code == ErrorCode.INVALID_RECORD
        reserved = m.GetTelemetrySubscriptionsResponse(client_instance_id=ZERO, subscription_id=0)
        assert push(c, reserved).error_code == ErrorCode.INVALID_REQUEST  # Uuid.RESERVED

    assert kafka_broker.client_metrics() == {"org.apache.kafka.producer.record.queue.time.avg": 1.25}
