"""__consumer_offsets is compacted from the moment its logs open: retention never deletes coordinator
state, while an ordinary topic's retention applies. Also when the topic metadata file is gone and the
broker adopts the partitions it finds on disk (which used to open them under the delete policy)."""
from __future__ import annotations

import asyncio
import os

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from kcoord.broker.app import Broker
from kcoord.broker.config import BrokerConfig
from kcoord.metadata.topics import CONSUMER_OFFSETS, METADATA_FILE
from kcoord.testkit.broker_process import TEST_SETTINGS
from tests.broker.test_lifecycle import BOUND_S

KEPT_OFFSET = 7


def commit(bootstrap: str, group: str, tp: TopicPartition, offset: int) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, tp: TopicPartition) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(tp)
    finally:
        consumer.close()


def fill(bootstrap: str, tp: TopicPartition) -> None:
    """Several segments in both the ordinary topic and __consumer_offsets-0, with the record worth
    keeping (group "keeper") in an old one."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(40):
            producer.send(tp.topic, value=b"x" * 100 + b"%d" % i).get(BOUND_S)
    finally:
        producer.close(BOUND_S)
    commit(bootstrap, "keeper", tp, KEPT_OFFSET)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="churn", enable_auto_commit=False)
    try:
        for i in range(60):
            consumer.commit({tp: OffsetAndMetadata(i, "", -1)})
    finally:
        consumer.close()


def keeper_records(offsets_log) -> int:
    return sum(bytes(batch).count(b"keeper") for _header, batch in offsets_log.batches())


@pytest.mark.parametrize("metadata", ["kept", "lost"])
async def test_consumer_offsets_keep_their_records_under_a_tiny_retention(tmp_path, metadata):
    base = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"), **TEST_SETTINGS,
            "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "1024",
            "log.segment.bytes": "1024"}
    tp = TopicPartition("plain", 0)
    broker = Broker(BrokerConfig.load(overrides=base))
    await broker.start()
    try:
        broker.topics.create(tp.topic, 1)
        await asyncio.to_thread(fill, broker.bootstrap, tp)
    finally:
        await broker.stop(timeout=5.0)
    if metadata == "lost":
        os.remove(tmp_path / "data" / METADATA_FILE)

    # Every closed segment is now older than retention.ms.
    broker = Broker(BrokerConfig.load(overrides={**base, "log.retention.ms": "1"}))
    await broker.start()
    try:
        offsets_log = broker.logs.get(CONSUMER_OFFSETS, 0)
        assert offsets_log.config.cleanup_policy == "compact"
        assert len(offsets_log.segments) > 1 and keeper_records(offsets_log) == 1
        plain = broker.topics.log(tp.topic, 0)
        assert plain.log_start_offset == 0 and len(plain.segments) > 1
        await broker.logs.maintain_once()
        assert plain.log_start_offset > 0  # retention applies to the ordinary topic
        assert keeper_records(offsets_log) == 1  # and never to coordinator state
    finally:
        await broker.stop(timeout=5.0)

    broker = Broker(BrokerConfig.load(overrides={**base, "log.retention.ms": "1"}))
    await broker.start()
    try:  # loaded from what the log kept
        assert await asyncio.to_thread(committed, broker.bootstrap, "keeper", tp) == KEPT_OFFSET
    finally:
        await broker.stop(timeout=5.0)
