"""Static membership (KIP-345) with real kafka-python consumers: a static member that restarts
within its session timeout gets its partitions back without a rebalance."""
from __future__ import annotations

import re

from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.procs import disjoint_cover

PARTITIONS = 4
TOPIC, GROUP = "static-topic", "static-group"


def test_static_member_restart_without_rebalance(server):
    server.create_topic(TOPIC, PARTITIONS)

    def start(instance: str) -> procs.ConsumerProcess:
        return procs.python_consumer("kafka-python", server.bootstrap, GROUP, TOPIC, instance,
                                     session_timeout_ms=30000, instance_id=instance)

    consumers = [start("static-0"), start("static-1")]
    try:
        wait_until(lambda: disjoint_cover([c.assignment for c in consumers], PARTITIONS), 60,
                   "a stable static group\n" + "\n".join(c.describe() for c in consumers))
        stayer, leaver = consumers
        before = list(leaver.assignment)
        stayer_rebalances = stayer.assignment_count
        rebalances_logged = len(_rebalances(server.log_text()))

        assert leaver.terminate() == 0  # a static member's close() sends no LeaveGroup
        restarted = start("static-1")
        consumers.append(restarted)
        wait_until(lambda: restarted.assignment is not None, 60, "the restarted member's assignment\n"
                   + restarted.describe())
        assert restarted.assignment == before
        keys = server.produce_keyed(TOPIC, 40, prefix="static-")
        wait_until(lambda: len(stayer.records()) + len(restarted.records()) >= 40, 60, "consumption resumes")
        assert sorted(k for c in (stayer, restarted) for _p, _o, k in c.records()) == sorted(keys)
        assert stayer.assignment_count == stayer_rebalances, "the other member saw no rebalance"
        assert len(_rebalances(server.log_text())) == rebalances_logged, "the server started no rebalance"
    finally:
        procs.stop_all(consumers)


def _rebalances(log: str) -> list[str]:
    return re.findall(rf"Preparing to rebalance group {GROUP} .*", log)
