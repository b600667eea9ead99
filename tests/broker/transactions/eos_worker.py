"""A consume-transform-produce process for the exactly-once tests (confluent-kafka / librdkafka).

    python eos_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [BATCH [PROTOCOL]]

Reads INPUT as a member of GROUP: with PROTOCOL classic (the default) a static member, so a restarted
process takes its place at once; with PROTOCOL consumer (KIP-848, group.protocol=consumer) a dynamic
member, whose dead predecessor's partitions come back when its session expires.
writes each record's value + b"!" to OUTPUT, and every BATCH records commits the produced records and
the consumed positions (send_offsets_to_transaction) in one transaction. Prints "committed N" after each
commit, N the records this process has transformed so far; runs until it is stopped.
"""
from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException, Producer


def main() -> int:
    bootstrap, source, sink, group, txn_id = sys.argv[1:6]
    batch = int(sys.argv[6]) if len(sys.argv) > 6 else 100
    protocol = sys.argv[7] if len(sys.argv) > 7 else "classic"
    config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    if protocol == "classic":
        config.update({"group.instance.id": txn_id, "session.timeout.ms": 6000})
    else:  # the session timeout is the group's (group.consumer.session.timeout.ms), not the client's
        config["group.protocol"] = protocol
    consumer = Consumer(config)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(60)
    consumer.subscribe([source])
    done = 0
    while True:
        msgs = consumer.consume(batch, timeout=1.0)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            continue
        producer.begin_transaction()
        for msg in msgs:
            producer.produce(sink, key=msg.key(), value=msg.value() + b"!", partition=msg.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
        try:
            producer.commit_transaction(60)
        except KafkaException:
            producer.abort_transaction(60)
            raise
        done += len(msgs)
        print(f"committed {done}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
