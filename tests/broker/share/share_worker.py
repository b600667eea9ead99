"""A share consumer in its own process, for tests that SIGKILL it: joins `group` in explicit
acknowledgement mode, polls once it gets records (for up to 30 s), acknowledges the first
`accept` of them (ACCEPT, commit_sync), prints one JSON line {"held": [[offset, delivery count], ...],
"accepted": [...]} and then holds the rest until it is killed."""
from __future__ import annotations

import json
import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer


def main(bootstrap: str, group: str, topic: str, accept: int) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "share-worker",
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    got: list = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:  # explicit mode: one poll's records, all held
        got = [msg for msg in consumer.poll(0.5) if msg.error() is None]
    accepted = got[:accept]
    for msg in accepted:
        consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
    if accepted:
        consumer.commit_sync()
    print(json.dumps({"held": [[m.offset(), m.delivery_count()] for m in got[accept:]],
                      "accepted": [m.offset() for m in accepted]}), flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
