"""Replication end to end over TCP (issue #26's data-plane acceptance): real etcd, 3 real kcoord nodes with
2 s sessions, real clients, faults by signals. Each test names its nemesis and its checker, records the
history it checks (tests.cluster.replication_checks.History) and prints it when it fails.

- SIGKILL of the leader, 10 rounds, under idempotent acks=all producers (kafka-python and confluent-kafka,
  each on a topic of its own; several partitions and kafkajs: tests/cluster/test_idempotent_failover_e2e.py):
  every acknowledged record read back exactly once at its offset, replicas byte-identical to the HW;
- (SIGSTOP of a leader past its lease, and its links cut: tests/cluster/test_fenced_leader_e2e.py)
- 2 of 3 replicas killed: acks=all is NOT_ENOUGH_REPLICAS, nothing acknowledged is lost;
- the whole ISR killed in order (unclean election off): the partition goes offline rather than electing
  the out-of-sync replica; the last ISR member back leads again with every acknowledged record."""
from __future__ import annotations

import os
import time

import pytest

from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from tests.cluster.replication_checks import (
    History,
    Producer,
    acked_after,
    check_exactly_once,
    check_identical_replicas,
    create_topic,
    data_dirs,
    fail_on,
    produce_error,
    produce_request,
    read_all,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000)]

# 3 by default: the 10-round acceptance with every client is test_idempotent_failover_e2e's
ROUNDS = int(os.environ.get("KCOORD_E2E_ROUNDS", "3"))


@pytest.mark.timeout(300)
def test_sigkill_of_the_leader_loses_no_acknowledged_record(kafka_cluster, admin):
    """Nemesis: SIGKILL of the current leader of the producers' partitions, ROUNDS times, each followed by
    failover (a new leader from the ISR, epoch + 1), the producers' next acknowledged write, a restart on
    the same data and the ISR full again. Checker: check_exactly_once + check_identical_replicas."""
    cluster, history = kafka_cluster, History()
    topics = {"kafka-python": "acked-kp", "confluent": "acked-ck"}
    for topic in topics.values():
        create_topic(cluster, admin, topic, [1, 2, 3])
    producers = [Producer(client, cluster.bootstrap_servers, topic, history) for client, topic in topics.items()]
    problems: list[str] = []
    try:
        for p in producers:
            p.start()
        for client in topics:
            wait_until(lambda c=client: history.of(c, "ack"), 30, f"{client}'s first acknowledged write")
        for round_ in range(ROUNDS):
            victim = cluster.wait_leader("acked-kp", 0)
            hit = [c for c, t in topics.items() if cluster.leader_of(t, 0) == victim]
            killed = history.add("nemesis", "kill", f"node {victim}", note=f"round {round_}, leads {hit}")
            cluster.kill(victim)
            for topic in topics.values():
                new = cluster.wait_leader(topic, 0, not_on=victim)
                history.add("nemesis", "leader", topic, note=f"node {new}")
            for client in topics:
                ack = wait_until(lambda c=client, k=killed: acked_after(history, c, k.t), 30, f"{client} acknowledged again")
                history.add("checker", "resumed", client, note=f"{ack.t - killed.t:.2f} s after the kill")
            cluster.restart(victim)
            history.add("nemesis", "restart", f"node {victim}")
            for topic in topics.values():
                cluster.wait_isr(topic, 0, 3)
            history.add("nemesis", "isr", "full")
    finally:
        for p in producers:
            p.stop()
    problems += [f"{p.client} crashed: {p.error!r}" for p in producers if p.error is not None]
    for client, topic in topics.items():
        cluster.wait_isr(topic, 0, 3)
        records, ends = read_all(cluster.bootstrap_servers, topic, 1)
        history.add("checker", "read", topic, note=f"{len(records)} records, end {ends}, "
                                                   f"{len(history.of(client, 'ack'))} acknowledged")
        problems += check_exactly_once(history, client, records)
        problems += check_identical_replicas(data_dirs(cluster), topic, 0, ends[0])
        if len(history.of(client, "ack")) < ROUNDS * 10:
            problems.append(f"{client}: only {len(history.of(client, 'ack'))} acknowledged writes")
    fail_on(history, problems)


@pytest.mark.timeout(180)
def test_isr_below_min_insync_replicas_refuses_acks_all_and_loses_nothing(kafka_cluster, admin):
    """Nemesis: SIGKILL of both followers (the ISR shrinks to the leader, below min.insync.replicas=2).
    Checker: acks=all answered NOT_ENOUGH_REPLICAS (and not appended), what was acknowledged before is all
    there after both come back, replicas byte-identical to the HW."""
    cluster, history = kafka_cluster, History()
    create_topic(cluster, admin, "minisr", [1, 2, 3])
    leader = cluster.wait_leader("minisr", 0)
    followers = [n for n in cluster.nodes if n != leader]
    problems: list[str] = []
    with KafkaWireClient.connect(cluster.nodes[leader].bootstrap_servers) as client:
        for i in range(20):
            error = produce_error(client.request(produce_request("minisr", [f"before-{i}"]), 9))
            history.add("raw", "ack" if error is ErrorCode.NONE else "fail", f"before-{i}", note=error.name)
        for node in followers:
            cluster.kill(node)
            history.add("nemesis", "kill", f"node {node}")
        isr = cluster.wait_isr("minisr", 0, 1, via=leader)
        history.add("checker", "isr", "minisr", note=f"ISR {isr}")
        for i in range(3):
            error = produce_error(client.request(produce_request("minisr", [f"refused-{i}"]), 9))
            history.add("raw", "ack" if error is ErrorCode.NONE else "fail", f"refused-{i}", note=error.name)
            if error is not ErrorCode.NOT_ENOUGH_REPLICAS:
                problems.append(f"acks=all with ISR {isr}: {error.name}, expected NOT_ENOUGH_REPLICAS")
    for node in followers:
        cluster.restart(node)
        history.add("nemesis", "restart", f"node {node}")
    cluster.wait_isr("minisr", 0, 3)
    records, ends = read_all(cluster.bootstrap_servers, "minisr", 1)
    values = [v for _p, _o, v in records]
    problems += [f"acknowledged {e.value} lost" for e in history.of("raw", "ack") if values.count(e.value) != 1]
    problems += [f"refused {v} is in the log" for v in values if v.startswith("refused-")]
    problems += check_identical_replicas(data_dirs(cluster), "minisr", 0, ends[0])
    fail_on(history, problems)


@pytest.mark.timeout(180)
def test_losing_the_whole_isr_takes_the_partition_offline_instead_of_electing_an_out_of_sync_replica(
        kafka_cluster, admin):
    """Nemesis: SIGKILL of a follower (it falls out of the ISR), acknowledged writes it misses, SIGKILL of
    the other follower and of the leader; the out-of-sync replica is restarted. Checker (unclean election
    off): no leader while only it is up; the last ISR member restarted leads again with every acknowledged
    record; with all back, replicas byte-identical to the HW."""
    cluster, history = kafka_cluster, History()
    create_topic(cluster, admin, "unclean", [1, 2, 3], min_isr=1)
    leader = cluster.wait_leader("unclean", 0)
    stale, last_follower = (n for n in cluster.nodes if n != leader)
    problems: list[str] = []

    def write(prefix: str, count: int) -> None:
        with KafkaWireClient.connect(cluster.nodes[leader].bootstrap_servers) as client:
            for i in range(count):
                error = produce_error(client.request(produce_request("unclean", [f"{prefix}-{i}"]), 9))
                history.add("raw", "ack" if error is ErrorCode.NONE else "fail", f"{prefix}-{i}", note=error.name)

    write("all", 10)
    cluster.kill(stale)
    history.add("nemesis", "kill", f"node {stale}", note="the replica that falls out of sync")
    cluster.wait_isr("unclean", 0, 2, via=leader)
    write("without-stale", 10)
    cluster.kill(last_follower)
    history.add("nemesis", "kill", f"node {last_follower}")
    cluster.wait_isr("unclean", 0, 1, via=leader)
    write("leader-only", 10)
    cluster.kill(leader)
    history.add("nemesis", "kill", f"node {leader}", note="the last ISR member")
    cluster.restart(stale)
    history.add("nemesis", "restart", f"node {stale}")
    cluster.wait_registered({stale}, timeout=20, via=stale)
    deadline = time.monotonic() + 6  # three sessions: time enough for an election that must not happen
    while time.monotonic() < deadline:
        state = cluster.partition("unclean", 0, via=stale)
        if state.leader_id != -1:
            history.add("checker", "leader", "unclean", note=f"node {state.leader_id} epoch {state.leader_epoch}")
            problems.append(f"node {state.leader_id} leads with the whole ISR gone (ISR {list(state.isr_nodes)})")
            break
        time.sleep(0.2)
    else:
        history.add("checker", "offline", "unclean", note=f"ISR {list(state.isr_nodes)}")
    cluster.restart(leader)
    history.add("nemesis", "restart", f"node {leader}")
    back = cluster.wait_leader("unclean", 0, via=stale, timeout=30)
    history.add("checker", "leader", "unclean", note=f"node {back}")
    if back != leader:
        problems.append(f"node {back} leads, expected the last ISR member {leader}")
    cluster.restart(last_follower)
    cluster.wait_isr("unclean", 0, 3, timeout=30)
    records, ends = read_all(cluster.bootstrap_servers, "unclean", 1)
    values = [v for _p, _o, v in records]
    problems += [f"acknowledged {e.value} lost" for e in history.of("raw", "ack") if values.count(e.value) != 1]
    problems += check_identical_replicas(data_dirs(cluster), "unclean", 0, ends[0])
    fail_on(history, problems)
