"""kafka-python 3 and aiokafka against the transaction coordinator: a consume-transform-produce loop
committing consumed offsets in the producer's transaction (send_offsets_to_transaction: AddOffsetsToTxn +
TxnOffsetCommit), and an aborted transaction invisible to their read_committed consumers and visible to
read_uncommitted ones (KIP-98 / KIP-447; Kafka's KafkaApis and TransactionCoordinator are the spec).
"""
from __future__ import annotations

import asyncio
import collections
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

INPUTS = 500


@pytest.fixture
def server(kcoord_server_factory):
    server = kcoord_server_factory({"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"})
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic(n, 1, 1) for n in ("kp-in", "kp-out", "aio-in", "aio-out", "kp-vis", "aio-vis")])
    admin.close()
    plain = KafkaProducer(bootstrap_servers=server.bootstrap)
    for i in range(INPUTS):
        plain.send("kp-in", b"v%d" % i)
        plain.send("aio-in", b"v%d" % i)
    plain.flush()
    plain.close()
    return server


def kp_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    consumer.assign([TopicPartition(topic, 0)])
    values = [msg.value for msg in consumer]
    consumer.close()
    return values


def kp_committed(bootstrap: str, group: str, topic: str) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    committed = consumer.committed(TopicPartition(topic, 0))
    consumer.close()
    return committed


def test_kafka_python_consume_transform_produce(server):
    b = server.bootstrap
    consumer = KafkaConsumer("kp-in", bootstrap_servers=b, group_id="kp-eos", enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed")
    consumer.partitions_for_topic("kp-in")  # its metadata before the first join: see tests/test_example_app.py's App
    producer = KafkaProducer(bootstrap_servers=b, transactional_id="kp-eos-1")
    producer.init_transactions()
    done = 0
    deadline = time.monotonic() + 120
    while done < INPUTS and time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=500, max_records=100)
        if not batches:
            continue
        producer.begin_transaction()
        offsets = {}
        for tp, msgs in batches.items():
            for msg in msgs:
                producer.send("kp-out", msg.value + b"!")
            offsets[tp] = OffsetAndMetadata(msgs[-1].offset + 1, "", -1)
            done += len(msgs)
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction()
    consumer.close()
    producer.close()
    counts = collections.Counter(kp_values(b, "kp-out", "read_committed"))
    assert sorted(counts) == sorted(b"v%d!" % i for i in range(INPUTS)) and max(counts.values()) == 1
    assert kp_committed(b, "kp-eos", "kp-in") == INPUTS


def test_kafka_python_aborted_transaction_visibility(server):
    b = server.bootstrap
    producer = KafkaProducer(bootstrap_servers=b, transactional_id="kp-vis-1")
    producer.init_transactions()
    for values, commit in (([b"c1"], True), ([b"a1", b"a2"], False), ([b"c2"], True)):
        producer.begin_transaction()
        for v in values:
            producer.send("kp-vis", v)
        producer.flush()
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()
    assert kp_values(b, "kp-vis", "read_committed") == [b"c1", b"c2"]
    assert kp_values(b, "kp-vis", "read_uncommitted") == [b"c1", b"a1", b"a2", b"c2"]


def test_aiokafka_consume_transform_produce_and_visibility(server):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    b = server.bootstrap

    async def loop() -> None:
        consumer = AIOKafkaConsumer("aio-in", bootstrap_servers=b, group_id="aio-eos", enable_auto_commit=False,
                                    auto_offset_reset="earliest", isolation_level="read_committed")
        producer = AIOKafkaProducer(bootstrap_servers=b, transactional_id="aio-eos-1")
        await consumer.start()
        await producer.start()
        try:
            done = 0
            while done < INPUTS:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500, max_records=100), 30)
                if not batches:
                    continue
                async with producer.transaction():
                    offsets = {}
                    for tp, msgs in batches.items():
                        for msg in msgs:
                            await producer.send("aio-out", msg.value + b"!")
                        offsets[tp] = msgs[-1].offset + 1
                        done += len(msgs)
                    await producer.send_offsets_to_transaction(offsets, "aio-eos")
            # an aborted transaction, then a committed one
            for values, commit in (([b"a1", b"a2"], False), ([b"c1"], True)):
                await producer.begin_transaction()
                for v in values:
                    await producer.send_and_wait("aio-vis", v)
                await (producer.commit_transaction() if commit else producer.abort_transaction())
        finally:
            await producer.stop()
            await consumer.stop()

    async def read(topic: str, isolation: str) -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=b, isolation_level=isolation, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([ATP(topic, 0)])
            await consumer.seek_to_beginning()
            values = []
            while True:
                got = await consumer.getmany(timeout_ms=2000)
                if not got:
                    return values
                values += [msg.value for msgs in got.values() for msg in msgs]
        finally:
            await consumer.stop()

    asyncio.run(loop())
    counts = collections.Counter(asyncio.run(read("aio-out", "read_committed")))
    assert sorted(counts) == sorted(b"v%d!" % i for i in range(INPUTS)) and max(counts.values()) == 1
    assert kp_committed(b, "aio-eos", "aio-in") == INPUTS
    assert asyncio.run(read("aio-vis", "read_committed")) == [b"c1"]
    assert asyncio.run(read("aio-vis", "read_uncommitted")) == [b"a1", b"a2", b"c1"]
