"""A consume-transform-produce process for the transaction coordinator failover test (confluent-kafka).

    python txn_eos_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [BATCH]

As tests/broker/transactions/eos_worker.py (a static member of GROUP; each BATCH of INPUT records
becomes OUTPUT records value + b"!" and the consumed positions, committed in one transaction), and what
librdkafka documents for a cluster whose nodes die: a retriable error of send_offsets_to_transaction or
commit_transaction is retried; one that requires an abort aborts the transaction and the process exits
with status 3 (its replacement, same transactional id, resumes from the committed positions); a fatal
one exits with status 4. Prints "committed N" after each commit, N the records this process has
transformed so far.
"""
from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException, Producer

TIMEOUT_S = 60


def _retrying(call) -> None:
    while True:
        try:
            call()
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise


def main() -> int:
    bootstrap, source, sink, group, txn_id = sys.argv[1:6]
    batch = int(sys.argv[6]) if len(sys.argv) > 6 else 100
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "group.instance.id": txn_id, "session.timeout.ms": 6000})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    _retrying(lambda: producer.init_transactions(TIMEOUT_S))
    consumer.subscribe([source])
    done = 0
    while True:
        msgs = [m for m in consumer.consume(batch, timeout=1.0) if m.error() is None]
        if not msgs:
            continue
        try:
            producer.begin_transaction()
            for msg in msgs:
                producer.produce(sink, key=msg.key(), value=msg.value() + b"!", partition=msg.partition())
            positions = consumer.position(consumer.assignment())
            _retrying(lambda positions=positions: producer.send_offsets_to_transaction(
                positions, consumer.consumer_group_metadata(), TIMEOUT_S))
            _retrying(lambda: producer.commit_transaction(TIMEOUT_S))
        except KafkaException as exc:
            error = exc.args[0]
            print(f"transaction failed: {error}", flush=True)
            if error.txn_requires_abort():
                producer.abort_transaction(TIMEOUT_S)
                return 3
            return 4
        done += len(msgs)
        print(f"committed {done}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
