"""The high watermark is the durable offset when every append is fsynced, the log end otherwise.

Fetch (records, high_watermark, last_stable_offset), ListOffsets latest and the long-poll wake-up all
follow it. An in-process broker on a kcoord.storage.FaultyFS holds fsyncs at will, so "appended but not yet
durable" is a state the test can stand in, with no timing involved.
"""
from __future__ import annotations

import asyncio
import threading

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kcoord.broker.app import Broker
from kcoord.broker.config import BrokerConfig
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import iter_batches
from kcoord.storage import FaultyFS
from kcoord.testkit.broker_process import TEST_SETTINGS
from kcoord.testkit.waiting import wait_until_async
from tests.broker.test_data_plane import create, fetch, produce, records_batch
from tests.broker.test_lifecycle import BOUND_S
from tests.support.raw_kafka import RawKafka

N = 40


@pytest.fixture
async def faulty_broker(tmp_path, request):
    """(broker, fs) with an optional log.flush.interval.messages from the test's parametrisation."""
    overrides = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"), **TEST_SETTINGS,
                 **getattr(request, "param", {})}
    fs = FaultyFS()
    broker = Broker(BrokerConfig.load(overrides=overrides), fs=fs)
    await broker.start()
    yield broker, fs
    if fs.fsync_gate is not None:
        fs.fsync_gate.set()  # never leave storage threads parked
    await broker.stop(timeout=5.0)


def hold_fsyncs(fs: FaultyFS) -> threading.Event:
    gate = threading.Event()
    fs.fsync_gate = gate
    return gate


def list_offset(port: int, topic: str, timestamp: int = -1) -> int:
    R = m.ListOffsetsRequest
    with RawKafka(port) as c:
        resp = c.request(2, 7, R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
            name=topic, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])]))
    return resp.topics[0].partitions[0].offset


def record_count(records) -> int:
    return sum(h.records_count for _p, h, _b in iter_batches(records or b""))


async def test_fetch_served_batches_not_yet_fsynced(faulty_broker):
    """Regression: Fetch used to serve (and report as high watermark) everything up to the log end,
    so a consumer could read a batch whose fsync was still running and that a crash would lose."""
    broker, fs = faulty_broker
    port = broker.listeners[0].port
    with RawKafka(port) as c:
        await asyncio.to_thread(create, c, "hw")
    plog = broker.topics.log("hw", 0)

    def long_poll():
        with RawKafka(port) as c:
            return fetch(c, "hw", 0, max_wait_ms=60000, min_bytes=1)

    poller = asyncio.create_task(asyncio.to_thread(long_poll))
    await wait_until_async(lambda: ("hw", 0) in broker.fetch_waiters._waiting,
                           BOUND_S, "the long poll parked")

    gate = hold_fsyncs(fs)

    def produce_all():
        with RawKafka(port) as c:
            return produce(c, "hw", records_batch(5))

    producing = asyncio.create_task(asyncio.to_thread(produce_all))
    await wait_until_async(lambda: plog.log_end_offset == 5,
                           BOUND_S, "5 records written")  # written, its fsync held

    def look():
        with RawKafka(port) as c:
            return fetch(c, "hw", 0).responses[0].partitions[0]

    part = await asyncio.to_thread(look)
    assert (part.error_code, part.high_watermark, part.last_stable_offset) == (ErrorCode.NONE, 0, 0)
    assert record_count(part.records) == 0
    # Latest is the high watermark; a timestamp or max-timestamp lookup finds nothing above it.
    assert [await asyncio.to_thread(list_offset, port, "hw", ts) for ts in (-1, -3, 0)] == [0, -1, -1]
    # The write did not wake the long poll into answering with nothing, nor the producer.
    assert not poller.done() and not producing.done()

    gate.set()
    acked = await asyncio.wait_for(producing, BOUND_S)
    assert (acked.error_code, acked.base_offset) == (ErrorCode.NONE, 0)
    woken = (await asyncio.wait_for(poller, BOUND_S)).responses[0].partitions[0]
    assert (woken.high_watermark, record_count(woken.records)) == (5, 5)
    assert [await asyncio.to_thread(list_offset, port, "hw", ts) for ts in (-1, -3, 0)] == [5, 0, 0]


async def test_acks_zero_batches_become_visible_after_their_fsync(faulty_broker):
    broker, fs = faulty_broker
    port = broker.listeners[0].port
    with RawKafka(port) as c:
        await asyncio.to_thread(create, c, "fire-and-forget")
    plog = broker.topics.log("fire-and-forget", 0)
    gate = hold_fsyncs(fs)
    with RawKafka(port) as c:
        await asyncio.to_thread(produce, c, "fire-and-forget", records_batch(3), 0, 0)
        await wait_until_async(lambda: plog.log_end_offset == 3, BOUND_S, "3 records written")

        def long_poll():
            return fetch(c, "fire-and-forget", 0, max_wait_ms=60000, min_bytes=1).responses[0].partitions[0]

        poller = asyncio.create_task(asyncio.to_thread(long_poll))
        await wait_until_async(lambda: ("fire-and-forget", 0) in broker.fetch_waiters._waiting,
                               BOUND_S, "the long poll parked")
        gate.set()  # nobody awaits this fsync, yet it must make the batch readable and wake the poll
        part = await asyncio.wait_for(poller, BOUND_S)
    assert (part.high_watermark, record_count(part.records)) == (3, 3)


def produce_and_consume(bootstrap: str, topic: str) -> tuple[dict[int, int], list[bytes]]:
    """kafka-python: N acks=all sends, the end offset a consumer sees, and what it reads from 0."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=1)
    try:
        for i in range(N):
            producer.send(topic, key=b"k", value=b"v%d" % i).get(BOUND_S)
    finally:
        producer.close(BOUND_S)
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])
        got: list[bytes] = []
        for _ in range(200):  # bounded; each poll returns as soon as data is there
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
            if len(got) >= N:
                break
    finally:
        consumer.close()
    return {tp.partition: end[tp]}, got


@pytest.mark.parametrize("faulty_broker", [{"log.flush.interval.messages": "1"}], indirect=True)
async def test_fsync_per_append_real_clients_see_every_acknowledged_record(faulty_broker):
    broker, _fs = faulty_broker
    topic = "durable-hw"
    broker.topics.create(topic, 1)
    end, got = await asyncio.to_thread(produce_and_consume, broker.bootstrap, topic)
    plog = broker.topics.log(topic, 0)
    assert end == {0: N} and got == [b"v%d" % i for i in range(N)]
    assert plog.recovery_point == plog.log_end_offset == N


@pytest.mark.parametrize("faulty_broker", [{"log.flush.interval.messages": "10000"}], indirect=True)
async def test_os_flush_policy_serves_up_to_the_log_end(faulty_broker):
    """acks come before any fsync under this policy, so the high watermark is the log end: consumers
    read what is acknowledged even while no fsync can complete."""
    broker, fs = faulty_broker
    topic = "os-flush-hw"
    broker.topics.create(topic, 1)
    plog = broker.topics.log(topic, 0)
    durable_before = plog.recovery_point
    hold_fsyncs(fs)
    end, got = await asyncio.to_thread(produce_and_consume, broker.bootstrap, topic)
    assert end == {0: N} and got == [b"v%d" % i for i in range(N)]
    assert plog.log_end_offset == N and plog.recovery_point == durable_before  # served, not yet fsynced


async def test_long_poll_of_a_real_consumer_is_woken_by_the_fsync(kcoord_broker):
    """A kafka-python consumer parked in a long fetch gets a record as soon as it is durable,
    well before its fetch_max_wait_ms (which is longer than the test's bound)."""
    topic = "wake"
    kcoord_broker.topics.create(topic, 1)
    bootstrap = kcoord_broker.bootstrap
    tp = TopicPartition(topic, 0)
    started = threading.Event()

    def consume_one():
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                 fetch_max_wait_ms=120_000, request_timeout_ms=180_000)
        try:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            started.set()
            batch = consumer.poll(timeout_ms=int(BOUND_S * 1000))
            return [r.value for rs in batch.values() for r in rs]
        finally:
            consumer.close()

    consuming = asyncio.create_task(asyncio.to_thread(consume_one))
    await wait_until_async(lambda: (topic, 0) in kcoord_broker.fetch_waiters._waiting,
                           BOUND_S, "the consumer's long poll parked")
    assert started.is_set()
    with RawKafka(kcoord_broker.listeners[0].port) as c:
        await asyncio.to_thread(produce, c, topic, records_batch(1))
    assert await asyncio.wait_for(consuming, BOUND_S) == [b"v0"]


async def test_a_failed_fsync_is_never_acknowledged_nor_served(faulty_broker):
    broker, fs = faulty_broker
    port = broker.listeners[0].port
    with RawKafka(port) as c:
        await asyncio.to_thread(create, c, "eio")
        fs.fail_next_fsync()
        failed = await asyncio.to_thread(produce, c, "eio", records_batch(4))
        assert (failed.error_code, failed.base_offset) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        part = (await asyncio.to_thread(fetch, c, "eio", 0)).responses[0].partitions[0]
        assert (part.high_watermark, record_count(part.records)) == (0, 0)
        # The log cut the lost batch away; the next one takes its offsets and is served.
        again = await asyncio.to_thread(produce, c, "eio", records_batch(2))
        assert (again.error_code, again.base_offset) == (ErrorCode.NONE, 0)
        part = (await asyncio.to_thread(fetch, c, "eio", 0)).responses[0].partitions[0]
    assert (part.high_watermark, record_count(part.records)) == (2, 2)


async def test_consumer_offsets_long_poll_is_woken_by_a_durable_commit(kcoord_broker):
    """Regression: the coordinator's own writes to __consumer_offsets (fsynced by its runtime, not by
    Produce) did not wake long polls on that partition, so a reader of the offsets topic (Burrow,
    kminion's offsetsTopic mode) waited out its whole fetch_max_wait_ms for every commit."""
    from kafka.structs import OffsetAndMetadata

    from kcoord.protocol.consumer_offsets import decode_key, partition_for

    await asyncio.wait_for(kcoord_broker.group_coordinator.loaded_event.wait(), BOUND_S)
    group = "offsets-reader-wake"
    kcoord_broker.topics.create("committed", 1)
    partition = partition_for(group, kcoord_broker.config.get("offsets.topic.num.partitions"))
    offsets_tp = TopicPartition("__consumer_offsets", partition)
    bootstrap = kcoord_broker.bootstrap

    def read_one_commit():
        reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                               fetch_max_wait_ms=120_000, request_timeout_ms=180_000)
        try:
            reader.assign([offsets_tp])
            reader.seek(offsets_tp, reader.end_offsets([offsets_tp])[offsets_tp])
            batch = reader.poll(timeout_ms=int(BOUND_S * 1000))
            return [decode_key(r.key) for rs in batch.values() for r in rs]
        finally:
            reader.close()

    reading = asyncio.create_task(asyncio.to_thread(read_one_commit))
    await wait_until_async(lambda: ("__consumer_offsets", partition) in kcoord_broker.fetch_waiters._waiting,
                           BOUND_S, "the long poll on __consumer_offsets parked")

    def commit():
        committer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            committer.assign([TopicPartition("committed", 0)])
            committer.commit({TopicPartition("committed", 0): OffsetAndMetadata(7, "", -1)})
        finally:
            committer.close()

    await asyncio.to_thread(commit)
    keys = await asyncio.wait_for(reading, BOUND_S)
    assert any(getattr(k, "topic", None) == "committed" and getattr(k, "partition", None) == 0 for k in keys), keys
