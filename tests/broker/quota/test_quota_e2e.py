"""Client quotas over TCP with librdkafka (confluent-kafka): a producer above its producer_byte_rate gets
throttle_time_ms, its throttle_cb fires, and it is slowed to the quota; the quotas survive a restart; the
admin endpoint's `throttle` fault throttles without any quota.

Kafka's side: KafkaApis.handleProduceRequest records the request against quotas.produce
(ClientQuotaManager.maybeRecordAndGetThrottleTimeMs) and answers with the throttle time, then mutes the
channel for it (RequestChannel / SocketServer, KIP-219); librdkafka reports it through throttle_cb
(rdkafka_broker.c: rd_kafka_op_throttle_time) and holds back its own requests to that broker meanwhile.
"""
from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import Producer

from kcoord.protocol import messages as m
from kcoord.testkit.waiting import wait_until
from tests.support.raw_kafka import RawKafka

QUOTA = 200_000              # producer_byte_rate, bytes a second
RECORD = b"x" * 10_000
TOTAL_BYTES = 1_600_000      # 8 quota-seconds
# Short windows: the rate counts at least (samples - 1) windows, so the burst allowed before throttling
# starts is one window's worth rather than the ten of Kafka's default 11 x 1 s.
WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


def call(port: int, key: int, version: int, body):
    with RawKafka(port) as c:
        c.send_request(key, version, body)
        frame = c.read_frame()
    return m.response_codec(key, version).decode(frame, 5)[0]


def set_quota(port: int, client_id: str | None, value: float | None):
    R = m.AlterClientQuotasRequest
    resp = call(port, 49, 1, R(validate_only=False, entries=[R.EntryData(
        entity=[R.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[R.OpData(key="producer_byte_rate", value=value or 0.0, remove=value is None)])]))
    assert [(e.error_code, e.error_message) for e in resp.entries] == [(0, None)]


def described(port: int) -> dict:
    R = m.DescribeClientQuotasRequest
    resp = call(port, 48, 1, R(components=[R.ComponentData(entity_type="client-id", match_type=2, match=None)],
                               strict=True))
    assert resp.error_code == 0
    return {e.entity[0].entity_name: {v.key: v.value for v in e.values} for e in resp.entries}


def produce(bootstrap: str, client_id: str, total: int) -> tuple[float, list[float]]:
    """Seconds to produce and acknowledge `total` bytes, and each throttle librdkafka reported (seconds)."""
    throttles: list[float] = []
    # requests of about two records: a throttle is only known after the request that caused it, so the
    # measurement is as fine as the requests are small against the quota
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "batch.size": 20_000,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    producer.produce("quota-topic", b"warm-up")
    assert producer.flush(10) == 0
    errors: list = []
    started = time.monotonic()
    for _ in range(total // len(RECORD)):
        while True:
            try:
                producer.produce("quota-topic", RECORD, on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    elapsed = time.monotonic() - started
    assert errors == []
    return elapsed, throttles


@pytest.mark.kcoord(overrides=WINDOWS)
def test_a_producer_above_its_byte_rate_is_throttled_to_it_and_the_quota_survives_a_restart(kafka_broker):
    port = kafka_broker.port
    unthrottled, none = produce(kafka_broker.bootstrap_servers, "free-app", TOTAL_BYTES)
    assert none == []
    set_quota(port, "slow-app", QUOTA)
    throttled, throttles = produce(kafka_broker.bootstrap_servers, "slow-app", TOTAL_BYTES)
    rate = TOTAL_BYTES / throttled
    print(f"\nunthrottled {TOTAL_BYTES / unthrottled:,.0f} B/s; quota {QUOTA:,} B/s; throttled {rate:,.0f} B/s "
          f"(ratio to the quota {rate / QUOTA:.2f}); {len(throttles)} throttle_cb calls")
    # librdkafka saw throttle_time_ms (it also reports the return to 0 after a throttle)
    assert len([t for t in throttles if t > 0]) > 10
    assert 0.5 < rate / QUOTA < 1.5                             # slowed to the quota (one window of burst)
    assert (TOTAL_BYTES / unthrottled) / rate > 2               # and not because the broker is that slow

    kafka_broker.restart()
    assert described(port) == {"slow-app": {"producer_byte_rate": float(QUOTA)}}
    _elapsed, throttles = produce(kafka_broker.bootstrap_servers, "slow-app", QUOTA * 3)
    assert any(t > 0 for t in throttles)
    set_quota(port, "slow-app", None)
    assert described(port) == {}


@pytest.mark.kcoord(overrides={"metrics.port": "0"})
def test_a_throttle_fault_throttles_without_a_quota(kafka_broker):
    fault = kafka_broker.faults.add("Produce", action="throttle", throttle_ms=400, client_id="faulted", count=1)
    assert fault["throttle_ms"] == 400
    _elapsed, throttles = produce(kafka_broker.bootstrap_servers, "faulted", 20_000)
    wait_until(lambda: kafka_broker.faults.get(fault["id"])["fired"] == 1, 10, "the fault to fire")
    assert [t for t in throttles if t > 0] == [pytest.approx(0.4)]
    text = urllib.request.urlopen(f"http://127.0.0.1:{kafka_broker.metrics_port}/metrics").read().decode()
    assert 'kcoord_throttle_seconds_total{api="Produce",client_id="faulted"} 0.4' in text


def test_a_throttled_connection_reads_nothing_until_its_throttle_ends(kafka_broker):
    """KIP-219: the broker answers at once with throttle_time_ms, then mutes the channel for that long (Kafka:
    core/src/main/scala/kafka/network/RequestChannel.scala startThrottling / endThrottling, SocketServer's
    Processor handling ChannelMuteEvent.THROTTLE_STARTED; clients/.../network/KafkaChannel.java's mute
    states): the next request on that connection waits, while other connections are served. The throttle is
    far longer than the other connection's round trips, so no timing decides the outcome."""
    kafka_broker.faults.add("Metadata", action="throttle", throttle_ms=600_000, client_id="muted", count=1)
    metadata = m.MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with RawKafka(kafka_broker.port, client_id="muted") as muted, RawKafka(kafka_broker.port, client_id="other") as other:
        assert muted.request(3, 12, metadata).throttle_time_ms == 600_000
        muted.send_request(3, 12, metadata)
        assert [other.request(3, 12, metadata).throttle_time_ms for _ in range(3)] == [0, 0, 0]
        muted.sock.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing to read: the second request was not served
            muted.sock.recv(1)


def consume(bootstrap: str, client_id: str, records: int) -> tuple[float, list[float]]:
    """Seconds for a librdkafka consumer to read `records` records of quota-topic from the start."""
    from confluent_kafka import Consumer, TopicPartition

    throttles: list[float] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    try:
        consumer.assign([TopicPartition("quota-topic", 0, 0)])
        got, started = 0, time.monotonic()
        while got < records:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got += 1
        return time.monotonic() - started, throttles
    finally:
        consumer.close()


@pytest.mark.kcoord(overrides=WINDOWS)
def test_a_consumer_above_its_byte_rate_is_throttled_to_it(kafka_broker):
    """consumer_byte_rate: fetches answered empty while throttled (KafkaApis.handleFetchRequest), each no
    larger than the quota allows in a window (getMaxValueInQuotaWindow), so the consumer reads at the quota."""
    produce(kafka_broker.bootstrap_servers, "writer", TOTAL_BYTES)
    records = TOTAL_BYTES // len(RECORD) + 1          # and the warm-up record
    free, none = consume(kafka_broker.bootstrap_servers, "fast-reader", records)
    R = m.AlterClientQuotasRequest
    call(kafka_broker.port, 49, 1, R(validate_only=False, entries=[R.EntryData(
        entity=[R.EntityData(entity_type="client-id", entity_name="slow-reader")],
        ops=[R.OpData(key="consumer_byte_rate", value=float(QUOTA), remove=False)])]))
    slow, throttles = consume(kafka_broker.bootstrap_servers, "slow-reader", records)
    rate = TOTAL_BYTES / slow
    print(f"\nconsumer unthrottled {TOTAL_BYTES / free:,.0f} B/s; quota {QUOTA:,} B/s; throttled {rate:,.0f} B/s "
          f"(ratio to the quota {rate / QUOTA:.2f})")
    assert none == [] and any(t > 0 for t in throttles)
    # below the quota rather than above: with two 1 s samples a fetch right after a full one is throttled
    # for a whole window and answered empty, Kafka's rule; never starved (each fetch fits a window)
    assert 0.5 < rate / QUOTA < 1.5
    assert (TOTAL_BYTES / free) / rate > 2


def test_a_client_over_its_request_percentage_is_throttled_on_every_api_and_others_are_not(kafka_broker):
    """request_percentage (KIP-124): serving time as a percentage of one thread, throttled for at most one
    window (ClientRequestQuotaManager: nanosToPercentage, boundedThrottleTime with maxThrottleTimeMs); with
    it defined, heartbeats leave their frame fast path so they are timed too. ApiVersions is exempt.
    The quota is far below what any request costs (a millionth of a percent over the 10 s the rate spans
    is 0.1 us of serving time), so every request of `busy` is throttled however fast this machine is."""
    R = m.AlterClientQuotasRequest
    call(kafka_broker.port, 49, 1, R(validate_only=False, entries=[R.EntryData(
        entity=[R.EntityData(entity_type="client-id", entity_name="busy")],
        ops=[R.OpData(key="request_percentage", value=1e-6, remove=False)])]))
    metadata = m.MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with RawKafka(kafka_broker.port, client_id="busy") as busy, RawKafka(kafka_broker.port, client_id="idle") as idle:
        throttles = []
        for _ in range(3):
            throttles.append(busy.request(3, 12, metadata).throttle_time_ms)
        assert all(0 < t <= 1000 for t in throttles)               # at most quota.window.size.seconds
        heartbeat = busy.request(12, 4, m.HeartbeatRequest(group_id="nobody", generation_id=1, member_id="x",
                                                           group_instance_id=None))
        assert heartbeat.throttle_time_ms > 0
        assert busy.request(18, 3, m.ApiVersionsRequest(client_software_name="t", client_software_version="1")
                            ).throttle_time_ms == 0
        assert [idle.request(3, 12, metadata).throttle_time_ms for _ in range(3)] == [0, 0, 0]
