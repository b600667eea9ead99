"""kafka-python consumers in separate processes live through a group's whole life against the real
server: formation, a fourth member joining, a clean close, a SIGKILL, and a server restart — no
message lost, none consumed twice outside the tail in flight during the restart."""
from __future__ import annotations

import collections
import re
import signal

from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.procs import committed_max, disjoint_cover

PARTITIONS = 6
BATCH = 60
SESSION_TIMEOUT_MS = 6000  # generous: a loaded CI box must not expire a live member
TOPIC, GROUP = "lifecycle", "lifecycle-group"


def test_group_lifecycle(restartable_server):
    server = restartable_server
    server.create_topic(TOPIC, PARTITIONS)
    consumers: list[procs.ConsumerProcess] = []
    produced: list[str] = []
    done_batches: list[list[str]] = []

    def start(name: str) -> procs.ConsumerProcess:
        c = procs.python_consumer("kafka-python", server.bootstrap, GROUP, TOPIC, name,
                                  session_timeout_ms=SESSION_TIMEOUT_MS)
        consumers.append(c)
        return c

    def live():
        return [c for c in consumers if c.alive]

    def consumed_keys() -> collections.Counter:
        return collections.Counter(k for c in consumers for _p, _o, k in c.records())

    def wait_stable(members: list[procs.ConsumerProcess], what: str) -> None:
        wait_until(lambda: disjoint_cover([c.assignment for c in members], PARTITIONS), 60,
                   f"{what}: disjoint assignments covering all partitions\n"
                   + "\n".join(c.describe() for c in consumers))

    def produce_and_drain(what: str) -> list[str]:
        keys = server.produce_keyed(TOPIC, BATCH, prefix=f"{what}-")
        produced.extend(keys)
        wait_until(lambda: all(consumed_keys()[k] for k in keys), 60, f"batch {what} consumed")
        ends = server.end_offsets(TOPIC, PARTITIONS)
        wait_until(lambda: committed_max(consumers) == ends, 30, f"batch {what} committed")
        done_batches.append(keys)
        return keys

    try:
        first = [start(f"c{i}") for i in range(3)]
        wait_stable(first, "three members")
        produce_and_drain("formed")

        before = [c.assignment_count for c in first]
        fourth = start("c3")
        wait_stable(first + [fourth], "a fourth member")
        produce_and_drain("four")
        assert fourth.assignment_count == 1
        assert [c.assignment_count for c in first] == [n + 1 for n in before], "exactly one rebalance"

        assert fourth.terminate() == 0  # close(): LeaveGroup, its partitions move without a timeout
        wait_stable(first, "after a clean close")
        produce_and_drain("closed")

        first[2].kill()  # SIGKILL: no LeaveGroup; the session timeout notices
        wait_stable(first[:2], "after a SIGKILL")
        produce_and_drain("killed")

        produced.extend(server.produce_keyed(TOPIC, BATCH // 2, prefix="restart-a-"))
        server.restart(signal.SIGTERM)
        produced.extend(server.produce_keyed(TOPIC, BATCH // 2, prefix="restart-b-"))
        wait_until(lambda: all(consumed_keys()[k] for k in produced), 90,
                   "consumers resume after the server restart\n" + "\n".join(c.describe() for c in live()))
        counts = consumed_keys()
        settled = {k for batch in done_batches for k in batch}
        assert [k for k in settled if counts[k] != 1] == [], "consumed twice outside the restart's tail"
        assert set(counts) == set(produced), "nothing lost, nothing unknown"

        # The server log says why each rebalance happened (Kafka's wording, member ids "<client id>-<uuid>").
        log = server.log_text()
        for why in (r"Adding new member c3-", r"Removing member c3-\S+ on LeaveGroup",
                    r"removing member c2-\S+ on heartbeat expiration"):
            assert re.search(rf"Preparing to rebalance group {GROUP} .*reason: {why}", log, re.IGNORECASE), why
    finally:
        procs.stop_all(consumers)
