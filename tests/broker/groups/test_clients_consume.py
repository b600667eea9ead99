"""Each real client library, three consumers in one group on a 6-partition topic: the group forms
with disjoint assignments covering every partition, then every produced message is consumed exactly
once across the group. A mixed group (three libraries, range assignor) does the same."""
from __future__ import annotations

import collections
import itertools

import pytest

from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.procs import disjoint_cover

PARTITIONS = 6
MESSAGES = 300
_ids = itertools.count()


def _start(kind: str, bootstrap: str, group: str, topic: str, name: str, assignor: str):
    if kind == "kafkajs":
        if procs.NODE is None or not procs.KAFKAJS_PRESENT:
            pytest.skip("kafkajs is not installed: run `cd tests/js && npm install` (or `make tools`)")
        return procs.kafkajs_consumer(bootstrap, group, topic, name)
    if kind == "kcat":
        if procs.KCAT is None:
            pytest.skip("kcat is not installed: `apt-get install kcat` (or `make tools`)")
        return procs.kcat_consumer(bootstrap, group, topic, name)
    return procs.python_consumer(kind, bootstrap, group, topic, name, assignor=assignor)


def run_group(server, kinds: list[str], assignor: str = "roundrobin") -> None:
    n = next(_ids)
    topic, group = f"clients-{n}", f"clients-group-{n}"
    server.create_topic(topic, PARTITIONS)
    consumers = []
    try:
        for i, kind in enumerate(kinds):
            consumers.append(_start(kind, server.bootstrap, group, topic, f"{kind}-{i}", assignor))
        wait_until(lambda: all(c.alive for c in consumers) and disjoint_cover(
            [c.assignment for c in consumers], PARTITIONS), 90,
            "a stable group: disjoint assignments covering every partition\n"
            + "\n".join(c.describe() for c in consumers))
        assert all(c.assignment for c in consumers), "each consumer owns partitions"
        sent = server.produce_keyed(topic, MESSAGES)
        wait_until(lambda: sum(len(c.records()) for c in consumers) >= MESSAGES, 60,
                   "every message consumed\n" + "\n".join(c.describe() for c in consumers))
        records = [(p, o, k) for c in consumers for p, o, k in c.records()]
        counts = collections.Counter((p, o) for p, o, _k in records)
        assert max(counts.values()) == 1, "a message was consumed twice"
        assert sorted(k for _p, _o, k in records) == sorted(sent)
        for c in consumers:  # each consumed only what it was assigned
            assert {p for p, _o, _k in c.records()} <= set(c.assignment)
    finally:
        procs.stop_all(consumers)


@pytest.mark.parametrize("kind", ["kafka-python", "aiokafka", "confluent", "kafkajs", "kcat"])
def test_three_consumers_share_a_topic_exactly_once(server, kind):
    run_group(server, [kind] * 3)


def test_mixed_group_with_the_range_assignor(server):
    run_group(server, ["kafka-python", "aiokafka", "confluent"], assignor="range")
