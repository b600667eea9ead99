"""kafka-python 3's consume-transform-produce process for the exactly-once tests.

    python kp_eos_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [BATCH]

As eos_worker.py (confluent-kafka), with KafkaConsumer.group_metadata() handed to
send_offsets_to_transaction (KIP-447). Prints "committed N" after each commit; runs until stopped.
"""
from __future__ import annotations

import sys

from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata


def main() -> int:
    bootstrap, source, sink, group, txn_id = sys.argv[1:6]
    batch = int(sys.argv[6]) if len(sys.argv) > 6 else 100
    consumer = KafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed",
                             session_timeout_ms=6000, heartbeat_interval_ms=500)
    consumer.partitions_for_topic(source)  # its metadata before the first join: see tests/test_example_app.py's App
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    producer.init_transactions()
    done = 0
    while True:
        batches = consumer.poll(timeout_ms=500, max_records=batch)
        if not batches:
            continue
        producer.begin_transaction()
        offsets = {}
        for tp, msgs in batches.items():
            for msg in msgs:
                producer.send(sink, msg.value + b"!", partition=tp.partition)
            offsets[tp] = OffsetAndMetadata(msgs[-1].offset + 1, "", -1)
            done += len(msgs)
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction()
        print(f"committed {done}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
