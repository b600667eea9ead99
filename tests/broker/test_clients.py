"""Real clients produce keyed messages to a 6-partition topic and read them back by manual
partition assignment: every message exactly once, with its key, value, headers and offset.

kafka-python (idempotent by default: InitProducerId + sequences), aiokafka, confluent-kafka
(librdkafka 2.16), kafkajs 2.2.4 (node) and kcat (librdkafka 2.0 from Debian).
"""
from __future__ import annotations

import asyncio
import json
import pathlib
import shutil
import subprocess
import time
from collections import Counter, defaultdict

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

N = 60
PARTITIONS = 6
JS_DIR = pathlib.Path(__file__).resolve().parents[1] / "js"
DEADLINE_S = 30.0


def message(client: str, i: int) -> tuple[bytes, bytes, tuple]:
    return f"k{i}".encode(), f"v{i}-{client}".encode(), (("src", client.encode()), ("i", str(i).encode()))


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def read_back(bootstrap: str, topic: str, count: int) -> list[tuple]:
    """(partition, offset, key, value, headers) of everything in the topic, via kafka-python."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    out: list[tuple] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out += [(r.partition, r.offset, r.key, r.value, tuple((k, v) for k, v in r.headers))
                        for r in records]
        for records in consumer.poll(timeout_ms=300).values():  # anything extra would be a duplicate
            out += [(r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in records]
    finally:
        consumer.close()
    return out


def check_exactly_once(client: str, got: list[tuple], acked: dict[bytes, tuple[int, int]] | None = None) -> None:
    expected = Counter((k, v, h) for k, v, h in (message(client, i) for i in range(N)))
    assert Counter((k, v, tuple(h)) for _p, _o, k, v, h in got) == expected
    by_partition = defaultdict(list)
    for p, o, k, _v, _h in got:
        by_partition[p].append(o)
        assert all(p == p2 for p2, _o2, k2, _v2, _h2 in got if k2 == k)
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))  # dense, from 0, no gaps, no repeats
    if acked is not None:  # what the producer was told is where the record is
        assert {k: (p, o) for p, o, k, _v, _h in got} == acked


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_kafka_python(kcoord_shared_server, compression):
    bootstrap, topic = kcoord_shared_server.bootstrap, f"kp-{compression}"
    create_topic(bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, linger_ms=5)
    assert producer.config["enable_idempotence"]
    futures = {}
    for i in range(N):
        key, value, headers = message("kafka-python", i)
        futures[key] = producer.send(topic, key=key, value=value, headers=list(headers))
    producer.flush(DEADLINE_S)
    acked = {k: (f.get(DEADLINE_S).partition, f.get(DEADLINE_S).offset) for k, f in futures.items()}
    producer.close()
    check_exactly_once("kafka-python", read_back(bootstrap, topic, N), acked)


@pytest.mark.parametrize("idempotent", [False, True])
async def test_aiokafka(kcoord_shared_server, idempotent):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    bootstrap, topic = kcoord_shared_server.bootstrap, f"aiokafka-{idempotent}"
    await asyncio.to_thread(create_topic, bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent)
    await producer.start()
    acked = {}
    try:
        for i in range(N):
            key, value, headers = message("aiokafka", i)
            meta = await producer.send_and_wait(topic, key=key, value=value, headers=list(headers))
            acked[key] = (meta.partition, meta.offset)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    got = []
    try:
        consumer.assign([ATP(topic, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()
        async with asyncio.timeout(DEADLINE_S):
            while len(got) < N:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [(r.partition, r.offset, r.key, r.value, tuple(r.headers)) for r in records]
        got += [(r.partition, r.offset, r.key, r.value, tuple(r.headers))
                for records in (await consumer.getmany(timeout_ms=300)).values() for r in records]
    finally:
        await consumer.stop()
    check_exactly_once("aiokafka", got, acked)


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd", "snappy"])
def test_confluent_kafka(kcoord_shared_server, compression):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
    from confluent_kafka import TopicPartition as CTP

    bootstrap, topic = kcoord_shared_server.bootstrap, f"ck-{compression}"
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression,
                         "enable.idempotence": True, "linger.ms": 5})
    acked, errors = {}, []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.key()] = (msg.partition(), msg.offset())

    for i in range(N):
        key, value, headers = message("confluent-kafka", i)
        producer.produce(topic, key=key, value=value, headers=list(headers), on_delivery=on_delivery)
    assert producer.flush(DEADLINE_S) == 0
    assert not errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-manual-assignment",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    got = []
    try:
        consumer.assign([CTP(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < N and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.partition(), msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ())))
    finally:
        consumer.close()
    check_exactly_once("confluent-kafka", got, acked)


def test_kafkajs(kcoord_shared_server):
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed: run `cd tests/js && npm install` (make tools does it)")
    bootstrap, topic = kcoord_shared_server.bootstrap, "kafkajs"
    create_topic(bootstrap, topic)
    run = subprocess.run([node, str(JS_DIR / "produce.js"), bootstrap, topic, str(N)], capture_output=True,
                         text=True, timeout=60, cwd=JS_DIR)
    assert run.returncode == 0, run.stderr
    acks = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert acks and all(a["errorCode"] == 0 for a in acks)
    check_exactly_once("kafkajs", read_back(bootstrap, topic, N))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_kcat_compression_reaches_the_log(kcoord_shared_server, codec):
    """Debian's kcat (librdkafka 2.0) compresses only when ApiVersions lists Produce v0 (librdkafka before
    2.11.1 checks for that version; issue #24: against Produce 3-13 it silently sent uncompressed batches).
    Kafka 4 advertises Produce 0-13 for this reason (KAFKA-18659, KafkaApis / ApiVersionsResponse); the
    batches stored in the partition's segments must carry the codec kcat was asked for."""
    from kcoord.protocol.records import iter_batches

    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat; make tools does it)")
    bootstrap, topic = kcoord_shared_server.bootstrap, f"kcat-z-{codec}"
    create_topic(bootstrap, topic, partitions=1)
    lines = "".join(f"record {i} of a compressible value, {codec} " * 4 + "\n" for i in range(N))
    produce = subprocess.run([kcat, "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-z", codec, "-X", "acks=all"],
                             input=lines, capture_output=True, text=True, timeout=60)
    assert produce.returncode == 0, produce.stderr
    assert "not compressing" not in produce.stderr
    segments = sorted((kcoord_shared_server.data_dir / f"{topic}-0").glob("*.log"))
    codecs = [header.compression for seg in segments for _pos, header, _view in iter_batches(seg.read_bytes())]
    assert codecs and set(codecs) == {{"gzip": 1, "snappy": 2, "lz4": 3}[codec]}, codecs


@pytest.mark.parametrize("idempotent", ["false", "true"])
def test_kcat(kcoord_shared_server, idempotent):
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat; make tools does it)")
    bootstrap, topic = kcoord_shared_server.bootstrap, f"kcat-{idempotent}"
    create_topic(bootstrap, topic)
    # kcat applies -H headers to every message; keys come from "key:value" lines (-K:).
    lines = "".join(f"k{i}:v{i}-kcat\n" for i in range(N))
    produce = subprocess.run([kcat, "-P", "-b", bootstrap, "-t", topic, "-K:", "-H", "src=kcat",
                              "-X", "acks=all", "-X", f"enable.idempotence={idempotent}"], input=lines, capture_output=True, text=True, timeout=60)
    assert produce.returncode == 0, produce.stderr
    consume = subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                              "-f", "%p|%o|%k|%s|%h\\n"], capture_output=True, text=True, timeout=60)
    assert consume.returncode == 0, consume.stderr
    got = []
    for line in consume.stdout.splitlines():
        p, o, k, v, h = line.split("|")
        got.append((int(p), int(o), k, v, h))
    assert sorted((k, v) for _p, _o, k, v, _h in got) == sorted((f"k{i}", f"v{i}-kcat") for i in range(N))
    assert {h for *_rest, h in got} == {"src=kcat"}
    by_partition = defaultdict(list)
    for p, o, *_ in got:
        by_partition[p].append(o)
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
