"""Exactly-once consume-transform-produce with confluent-kafka (librdkafka) against kcoord, over TCP.

The loop (eos_worker.py) commits produced records and consumed positions in one transaction
(send_offsets_to_transaction: AddOffsetsToTxn + TxnOffsetCommit); it is SIGKILLed twice in the middle of
its work and restarted with the same transactional id, whose InitProducerId fences the dead instance
and aborts its open transaction (Kafka's TransactionCoordinator.handleInitProducerId, Ongoing ->
PrepareEpochFence -> PrepareAbort). A read_committed consumer of the output must then see every input
exactly once, and the group's committed offsets must equal the input's end offsets.

With `group.protocol=consumer` the consumer's group metadata carries its KIP-848 member epoch as the
generation, and TxnOffsetCommit is validated against that member as Kafka 4 validates it
(OffsetMetadataManager.validateTransactionalOffsetCommit -> ConsumerGroup.validateOffsetCommit with
isTransactional): issue #24, where every such commit was refused with ILLEGAL_GENERATION.
"""
from __future__ import annotations

import collections
import os
import select
import signal
import subprocess
import sys
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

WORKER = os.path.join(os.path.dirname(__file__), "eos_worker.py")
INPUTS = 10_000
PARTITIONS = 3


def _create(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS) for t in topics]).values():
        future.result(30)


def _produce_inputs(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(n):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _read_all(bootstrap: str, topic: str, isolation: str, expect_at_least: int, idle_s: float = 5.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}-{time.time()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    last = time.monotonic()
    while time.monotonic() - last < idle_s or len(values) < expect_at_least:
        if time.monotonic() - last > 60:
            break
        for msg in consumer.consume(500, timeout=0.5):
            if msg.error() is None:
                values.append(msg.value())
                last = time.monotonic()
    consumer.close()
    return values


# A dead consumer-protocol member keeps its partitions until its session expires: a short one for the test.
CONSUMER_PROTOCOL_SERVER = {"group.consumer.min.session.timeout.ms": "2000", "group.consumer.session.timeout.ms": "3000",
                            "group.consumer.min.heartbeat.interval.ms": "100",
                            "group.consumer.heartbeat.interval.ms": "300"}


def _start_worker(bootstrap: str, txn_id: str, protocol: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, WORKER, bootstrap, "in", "out", "eos", txn_id, "100", protocol],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_committed(proc: subprocess.Popen, at_least: int, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    output: collections.deque[str] = collections.deque(maxlen=20)
    while time.monotonic() < deadline:
        if not select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
            break
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        if line.startswith("committed "):
            n = int(line.split()[1])
            if n >= at_least:
                return n
    raise AssertionError(f"worker did not reach {at_least} committed inputs (exit {proc.poll()}):\n"
                         + "".join(output))


def _wait_group_caught_up(bootstrap: str, group: str, topic: str, timeout: float = 180) -> list[int]:
    """Wait until the group's committed offsets (fetched with require_stable: read_committed) are the
    topic's end offsets; returns them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    try:
        ends = [consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in tps]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if [tp.offset for tp in consumer.committed(tps, timeout=30)] == ends:
                return ends
            time.sleep(0.5)
        raise AssertionError(f"group {group} did not commit up to {ends}")
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce_survives_sigkill_exactly_once(kcoord_server_factory, protocol):
    server = kcoord_server_factory(CONSUMER_PROTOCOL_SERVER if protocol == "consumer" else None)
    bootstrap = server.bootstrap
    _create(bootstrap, "in", "out")
    _produce_inputs(bootstrap, "in", INPUTS)

    for kill_after in (2_000, 5_000):
        worker = _start_worker(bootstrap, "eos-1", protocol)
        _wait_committed(worker, kill_after)
        # Mid-transaction: it commits every 100 records, so the next transaction is under way.
        time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    worker = _start_worker(bootstrap, "eos-1", protocol)
    try:
        ends = _wait_group_caught_up(bootstrap, "eos", "in")
    finally:
        worker.kill()
        worker.wait(10)
    assert sum(ends) == INPUTS

    committed = _read_all(bootstrap, "out", "read_committed", INPUTS)
    counts = collections.Counter(committed)
    assert sorted(counts) == sorted(b"v%d!" % i for i in range(INPUTS))
    assert max(counts.values()) == 1, [v for v, c in counts.items() if c > 1][:10]

