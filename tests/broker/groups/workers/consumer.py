"""A group consumer in its own process, for the integration tests: one of kafka-python, aiokafka or
confluent-kafka, subscribed to one topic, committing synchronously after each batch it processed.

It reports on stdout, one JSON object per line:
  {"ev": "assigned", "partitions": [..]}    after every rebalance (the full new assignment)
  {"ev": "rec", "p": 0, "o": 12, "k": "k-12"}
  {"ev": "committed", "offsets": {"0": 13}} what a commit stored: the batch's partitions (kafka-python,
                                            aiokafka), every assigned partition's position (confluent-kafka)
  {"ev": "error", "error": "..."}           a commit that failed (the loop goes on; confluent-kafka's
                                            worker commits again on its next round, records or not)
SIGTERM closes the consumer cleanly (commit + LeaveGroup) and exits 0; --max-seconds bounds the run.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from tests.security import client_settings

STOP = False


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _stop(*_args) -> None:
    global STOP
    STOP = True


def reporting_listener(base):
    """A rebalance listener (of the library's own base class) that reports each new assignment."""

    class Listener(base):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            emit(ev="assigned", partitions=sorted(tp.partition for tp in assigned))

    return Listener()


def emit_batches(batches) -> dict[int, int]:
    """One "rec" event per record of a kafka-python / aiokafka poll; -> next offset per partition."""
    offsets = {}
    for tp, records in batches.items():
        for r in records:
            emit(ev="rec", p=r.partition, o=r.offset, k=r.key.decode() if r.key else None)
        offsets[tp.partition] = records[-1].offset + 1
    return offsets


def run_kafka_python(args) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignor = RangePartitionAssignor if args.assignor == "range" else RoundRobinPartitionAssignor
    extra = {"group_instance_id": args.instance_id} if args.instance_id else {}
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
        enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=args.session_timeout_ms // 4,
        partition_assignment_strategy=[assignor], reconnect_backoff_max_ms=500,
        retry_backoff_ms=100, request_timeout_ms=args.session_timeout_ms + 10000, **extra,
        **client_settings.kafka_python(args.security))
    consumer.partitions_for_topic(args.topic)  # before the first join: see tests/test_example_app.py's App
    consumer.subscribe([args.topic], listener=reporting_listener(ConsumerRebalanceListener))
    deadline = time.monotonic() + args.max_seconds
    while not STOP and time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=200)
        if not batches:
            continue
        offsets = emit_batches(batches)
        try:
            consumer.commit()
            emit(ev="committed", offsets=offsets)
        except Exception as exc:  # CommitFailed during a rebalance: the next batch commits again
            emit(ev="error", error=f"{type(exc).__name__}: {exc}")
    consumer.close()


def run_aiokafka(args) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    async def main():
        assignor = RangePartitionAssignor if args.assignor == "range" else RoundRobinPartitionAssignor
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.client_id,
            enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=args.session_timeout_ms // 4,
            partition_assignment_strategy=(assignor,), retry_backoff_ms=100,
            **client_settings.aiokafka(args.security))
        consumer.subscribe([args.topic], listener=reporting_listener(ConsumerRebalanceListener))
        await consumer.start()
        deadline = time.monotonic() + args.max_seconds
        try:
            while not STOP and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                if not batches:
                    continue
                offsets = emit_batches(batches)
                try:
                    await consumer.commit()
                    emit(ev="committed", offsets=offsets)
                except Exception as exc:
                    emit(ev="error", error=f"{type(exc).__name__}: {exc}")
        finally:
            await consumer.stop()

    asyncio.run(main())


def run_confluent(args) -> None:
    from confluent_kafka import Consumer

    owned: set[int] = set()

    def on_assign(consumer, partitions):
        if args.group_protocol == "consumer":  # KIP-848: incremental, what is added
            owned.update(tp.partition for tp in partitions)
        else:
            owned.clear()
            owned.update(tp.partition for tp in partitions)
        emit(ev="assigned", partitions=sorted(owned))

    def on_revoke(consumer, partitions):
        owned.difference_update(tp.partition for tp in partitions)
        emit(ev="assigned", partitions=sorted(owned))

    conf = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.client_id,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 500,
        **client_settings.confluent(args.security),
    }
    if args.group_protocol == "consumer":  # the coordinator assigns; timeouts are the broker's
        conf["group.protocol"] = "consumer"
        if args.remote_assignor:
            conf["group.remote.assignor"] = args.remote_assignor
    else:
        conf.update({"session.timeout.ms": args.session_timeout_ms,
                     "heartbeat.interval.ms": args.session_timeout_ms // 4,
                     "partition.assignment.strategy": args.assignor})
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)
    if args.group_protocol == "consumer":
        consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    else:
        consumer.subscribe([args.topic], on_assign=on_assign)
    deadline = time.monotonic() + args.max_seconds
    uncommitted = False  # records consumed whose positions no successful commit has stored yet
    while not STOP and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=500, timeout=0.2):
            if msg.error():
                emit(ev="error", error=str(msg.error()))
                continue
            key = msg.key()
            emit(ev="rec", p=msg.partition(), o=msg.offset(), k=key.decode() if key else None)
            uncommitted = True
        if uncommitted:
            uncommitted = not commit_confluent(consumer, args.topic)
    consumer.close()


def commit_confluent(consumer, topic: str) -> bool:
    """Commit every assigned partition's position and report what was stored: all of them, not only the
    last batch's, since a commit that failed (STALE_MEMBER_EPOCH when it raced the heartbeat that bumped
    this member's epoch) leaves earlier positions to a later commit. False: try again next round."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        stored = consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError._NO_OFFSET:  # nothing consumed in what is assigned now
            return True
        emit(ev="error", error=f"{type(exc).__name__}: {exc}")
        return False
    emit(ev="committed", offsets={tp.partition: tp.offset for tp in stored
                                  if tp.topic == topic and tp.error is None and tp.offset >= 0})
    return True


RUNNERS = {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent": run_confluent}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=sorted(RUNNERS), required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--client-id", default="kcoord-test")
    parser.add_argument("--assignor", choices=["range", "roundrobin"], default="roundrobin")
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--max-seconds", type=float, default=150.0)
    parser.add_argument("--security", type=json.loads, default=None,
                        help="TLS/SASL settings as JSON (tests/security/client_settings.py)")
    parser.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--remote-assignor", default=None, help="consumer protocol: uniform or range")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _stop)
    RUNNERS[args.client](args)
    emit(ev="closed")


if __name__ == "__main__":
    main()
