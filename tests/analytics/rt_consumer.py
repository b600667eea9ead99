"""A kafka-python consumer for the real-server analytics test, run as its own process so the test can
kill it (SIGKILL: a crash, the group notices by session timeout) or stop it (SIGTERM: LeaveGroup).

Prints one JSON line per event: {"assigned": [...]} after each rebalance, {"commit": [[topic, p, offset]]}
after each successful synchronous commit of its positions.
"""
import json
import signal
import sys
import time

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.structs import OffsetAndMetadata

bootstrap, group, client_id, topic = sys.argv[1:5]
stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))


def say(**event):
    print(json.dumps(event), flush=True)


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        pass

    def on_partitions_assigned(self, assigned):
        say(assigned=sorted([tp.topic, tp.partition] for tp in assigned))


consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                         enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=3,
                         session_timeout_ms=6000, heartbeat_interval_ms=1000)
consumer.partitions_for_topic(topic)  # its metadata before the first join: see tests/test_example_app.py's App
consumer.subscribe([topic], listener=Listener())
while not stopping:
    consumer.poll(timeout_ms=300)
    owned = sorted(consumer.assignment())
    if owned:
        offsets = {tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in owned}
        try:
            consumer.commit(offsets)
        except Exception as exc:                   # a rebalance in progress: commit again next round
            say(commit_failed=type(exc).__name__)
            continue
        say(commit=[[tp.topic, tp.partition, om.offset] for tp, om in offsets.items()])
    time.sleep(0.3)
consumer.close()
say(closed=True)
