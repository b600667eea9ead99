"""Topic configs changed at run time (IncrementalAlterConfigs through kafka-python's KafkaAdminClient)
take effect on the next retention / cleaner pass; the tests read the partition's segment files.

Kafka applies a topic config change to the live log at once (LogManager.updateTopicConfig), and the
retention and cleaner threads use it on their next pass (UnifiedLog.deleteOldSegments, LogCleaner).
"""
from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.admin import ConfigResource as KConfigResource
from kafka.errors import MessageSizeTooLargeError

from kcoord.protocol.records import decode_records
from kcoord.storage.reader import iter_partition_batches, list_segments
from kcoord.testkit.waiting import wait_until

HOUR_MS = 3_600_000


@pytest.fixture
def server(kcoord_server_factory):
    return kcoord_server_factory({"log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "200"})


@pytest.fixture
def admin(server):
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def alter(admin, topic: str, **configs: str) -> None:
    result = admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, topic, configs={
        k.replace("_", "."): (AlterConfigOp.SET, v) for k, v in configs.items()})])
    assert result == {"topic": {topic: "OK"}}


def produce(server, topic: str, records, **producer_config) -> None:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, linger_ms=0, **producer_config)
    try:
        for key, value, ts in records:
            producer.send(topic, value, key=key, partition=0, timestamp_ms=ts).get(timeout=10)
    finally:  # a refused record raises: its producer's thread must not outlive the test
        producer.close()


def segments(server, topic: str) -> list[int]:
    return [base for base, _path in list_segments(str(server.data_dir / f"{topic}-0"))]


def records_on_disk(server, topic: str) -> list[tuple[int, bytes, bytes]]:
    return [(r.offset, r.key, r.value) for _h, batch in iter_partition_batches(str(server.data_dir / f"{topic}-0"))
            for r in decode_records(batch)]


def test_retention_ms_and_bytes_changed_at_run_time(admin, server):
    admin.create_topics([NewTopic("aging", 1, 1, topic_configs={"segment.bytes": "300"})])
    old = int(time.time() * 1000) - 5 * HOUR_MS
    produce(server, "aging", [(None, b"old-%d" % i, old) for i in range(8)])
    produce(server, "aging", [(None, b"new-%d" % i, None) for i in range(4)])
    before = segments(server, "aging")
    assert before == [0, 4, 8]  # four ~70-byte batches per 300-byte segment: old, old, new (active)
    time.sleep(0.5)
    assert segments(server, "aging") == before  # 7 days by default: nothing expires
    alter(admin, "aging", retention_ms=str(HOUR_MS))
    wait_until(lambda: segments(server, "aging") == [8], 20, "the expired segments to go")
    assert [v for _o, _k, v in records_on_disk(server, "aging")] == [b"new-%d" % i for i in range(4)]

    alter(admin, "aging", retention_ms="-1", retention_bytes="400")
    produce(server, "aging", [(None, b"more-%d" % i, None) for i in range(8)])
    # 3 x 280 bytes: the oldest goes (560 left >= 400), the next stays (280 left would be < 400).
    wait_until(lambda: segments(server, "aging") == [12, 16], 20, "retention.bytes")


def test_segment_bytes_changed_at_run_time(admin, server):
    admin.create_topics([NewTopic("rolling", 1, 1)])
    produce(server, "rolling", [(None, b"a-%d" % i, None) for i in range(6)])
    assert len(segments(server, "rolling")) == 1
    alter(admin, "rolling", segment_bytes="300")
    produce(server, "rolling", [(None, b"b-%d" % i, None) for i in range(12)])
    assert len(segments(server, "rolling")) >= 3


def test_cleanup_policy_compact_then_both(admin, server):
    admin.create_topics([NewTopic("keyed", 1, 1, topic_configs={"segment.bytes": "400"})])
    produce(server, "keyed", [(b"k%d" % (i % 3), b"v%d" % i, None) for i in range(24)])
    assert len(records_on_disk(server, "keyed")) == 24
    alter(admin, "keyed", cleanup_policy="compact", min_cleanable_dirty_ratio="0.01")
    # The cleaner keeps the latest record per key in the segments it may clean (all but the active one).
    wait_until(lambda: len(records_on_disk(server, "keyed")) < 24, 20, "compaction")
    on_disk = records_on_disk(server, "keyed")
    latest = {}
    for offset, key, value in on_disk:
        latest[key] = (offset, value)
    assert {k: v for k, (_o, v) in latest.items()} == {b"k0": b"v21", b"k1": b"v22", b"k2": b"v23"}
    # compact,delete: retention applies too.
    alter(admin, "keyed", cleanup_policy="compact,delete", retention_ms="1")
    wait_until(lambda: segments(server, "keyed")[0] > 0 and len(segments(server, "keyed")) == 1, 20, "retention")


def test_max_message_bytes_and_log_append_time_at_run_time(admin, server):
    admin.create_topics([NewTopic("limits", 1, 1)])
    produce(server, "limits", [(None, b"x" * 2000, None)])
    alter(admin, "limits", max_message_bytes="1000", message_timestamp_type="LogAppendTime")
    with pytest.raises(MessageSizeTooLargeError):
        produce(server, "limits", [(None, b"y" * 2000, None)], retries=0)
    produce(server, "limits", [(None, b"small", 1000)])
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest")
    tp = TopicPartition("limits", 0)
    consumer.assign([tp])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        got += consumer.poll(timeout_ms=200).get(tp, [])
    consumer.close()
    assert [(r.value[:1], r.timestamp_type) for r in got] == [(b"x", 0), (b"s", 1)]
    assert got[1].timestamp > 1000  # the broker's append time replaced the producer's timestamp
