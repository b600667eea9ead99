"""A leader fenced off past its lease (issue #26's acceptance: "a leader paused past its lease, then resumed:
none of its pending acks=all writes is acknowledged, it becomes a follower, truncates and catches up. The
same with its links cut."): real etcd, 3 real kcoord nodes with 2 s sessions, links through
kcoord.testkit.links proxies. Three nemeses: SIGSTOP (then SIGCONT); its links to etcd and both other
nodes blackholed, or reset (then healed) -- a cut process keeps running and keeps its clients, and is
fenced by epochs and the ISR alone.

Kafka's rules followed: a leader completes an acks=all write only when the ISR holds it
(Partition.checkEnoughReplicasReachOffset); a follower of a newer leader epoch truncates its divergent tail
(AbstractFetcherThread.truncateOnFetchResponse, DivergingEpoch of KIP-595) before it rejoins the ISR."""
from __future__ import annotations

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

pytestmark = [pytest.mark.slow, pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000, links=True)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("nemesis", ["pause", "blackhole", "reset"])
def test_a_leader_fenced_off_past_its_lease_acknowledges_none_of_its_pending_writes(kafka_cluster, admin, nemesis):
    """Nemesis: the leader paused, or its links to etcd and to both other nodes cut (bytes stop /
    connections reset), with acks=all Produce requests sent to it right after (raw, 60 s timeout; a cut
    node's clients still reach it), while an idempotent producer writes to the new leader; then resumed /
    healed (the pending writes are answered once the node hears its lease is gone, or at their timeout).
    Checker: no pending write is answered NONE or in the log, the old leader registers again and rejoins
    the ISR as a follower -- a cut one after truncating the pending writes it appended (a paused one may
    read them only once it knows it lost its lease); every acknowledged record once; replicas
    byte-identical to the HW."""
    cluster, history = kafka_cluster, History()
    create_topic(cluster, admin, "fenced", [1, 2, 3])
    live = Producer("kafka-python", cluster.bootstrap_servers, "fenced", history)
    live.start()
    problems: list[str] = []
    pending = [f"pending-{i}" for i in range(5)]
    try:
        wait_until(lambda: history.of("kafka-python", "ack"), 30, "the first acknowledged write")
        old = cluster.wait_leader("fenced", 0)
        other = next(n for n in cluster.nodes if n != old)
        with KafkaWireClient.connect(cluster.nodes[old].bootstrap_servers) as client:
            if nemesis == "pause":
                cluster.pause(old)
            else:
                cluster.cut(old, mode=nemesis)
            history.add("nemesis", "fence", f"node {old}", note=nemesis)
            for value in pending:
                client.send(produce_request("fenced", [value]), 9)
                history.add("raw", "send", value, note=f"to node {old}")
            new = cluster.wait_leader("fenced", 0, not_on=old, via=other)
            elected = history.add("nemesis", "leader", "fenced", note=f"node {new}")
            wait_until(lambda: acked_after(history, "kafka-python", elected.t), 30, "writes to the new leader")
            time.sleep(1.0)  # the new leader's log grows past what the cut one has
            if nemesis == "pause":
                cluster.resume(old)
            else:
                cluster.heal(old)
            history.add("nemesis", "unfence", f"node {old}")
            # neither a paused nor a cut node knows its lease is gone until etcd tells it (as a partitioned
            # ZooKeeper-era broker learnt of its session's expiry on reconnecting): pending writes wait for it
            client.set_timeout(90)
            for value in pending:
                error = produce_error(client.receive())
                history.add("raw", "ack" if error is ErrorCode.NONE else "fail", value, note=error.name)
                if error is ErrorCode.NONE:
                    problems.append(f"{value}: the fenced-off leader acknowledged it")
        cluster.nodes[old].wait_for_log(rf"node {old} registered again with broker epoch \d+", timeout=30)
        isr = cluster.wait_isr("fenced", 0, 3, via=other, timeout=60)
        state = cluster.partition("fenced", 0, via=other)
        history.add("checker", "isr", "fenced", note=f"ISR {isr}, leader {state.leader_id} epoch {state.leader_epoch}")
        if state.leader_id == old:
            problems.append(f"node {old} leads again at once (epoch {state.leader_epoch})")
        truncated = cluster.nodes[old].log_text().count("log diverges from leader")
        history.add("checker", "truncate", f"node {old}", note=f"{truncated} truncation(s) logged")
        if not truncated and nemesis != "pause":
            problems.append(f"node {old} rejoined without truncating the pending writes it appended")
    finally:
        live.stop()
    problems += [f"producer crashed: {live.error!r}"] if live.error is not None else []
    cluster.wait_isr("fenced", 0, 3)
    records, ends = read_all(cluster.bootstrap_servers, "fenced", 1)
    problems += [f"{v} (never acknowledged) is in the log at {o}" for _p, o, v in records if v in pending]
    problems += check_exactly_once(history, "kafka-python", records)
    problems += check_identical_replicas(data_dirs(cluster), "fenced", 0, ends[0])
    fail_on(history, problems)


@pytest.mark.timeout(180)
@pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000, links=True,
                            overrides={"replica.lag.time.max.ms": "2000"})
def test_a_follower_cut_from_its_leader_only_leaves_the_isr_and_rejoins_when_healed(kafka_cluster, admin):
    """Nemesis: the link between the leader and one follower cut (blackhole), nothing else: both keep their
    leases. Checker (Kafka's Partition.maybeShrinkIsr / maybeExpandIsr): the follower leaves the ISR after
    replica.lag.time.max.ms, acks=all goes on with the other two, the leader stays; healed, the follower
    catches up and is back in the ISR; every acknowledged record once, replicas identical to the HW."""
    cluster, history = kafka_cluster, History()
    create_topic(cluster, admin, "pair", [1, 2, 3])
    live = Producer("kafka-python", cluster.bootstrap_servers, "pair", history)
    live.start()
    problems: list[str] = []
    try:
        wait_until(lambda: history.of("kafka-python", "ack"), 30, "the first acknowledged write")
        leader = cluster.wait_leader("pair", 0)
        follower = next(n for n in cluster.nodes if n != leader)
        cluster.cut(follower, from_etcd=False, from_nodes={leader})
        cut = history.add("nemesis", "cut", f"node {follower} from node {leader}")
        isr = cluster.wait_isr("pair", 0, 2, timeout=30)
        history.add("checker", "isr", "pair", note=f"ISR {isr}")
        if follower in isr:
            problems.append(f"ISR {isr} still has the cut follower {follower}")
        shrunk = history.add("checker", "shrunk", "pair")
        wait_until(lambda: acked_after(history, "kafka-python", shrunk.t), 30, "acks=all with two in the ISR")
        if cluster.leader_of("pair", 0) != leader:
            problems.append(f"the leader moved from {leader} although it kept its lease")
        cluster.heal(follower)
        history.add("nemesis", "heal", f"node {follower}", note=f"{history.events[-1].t - cut.t:.1f} s after the cut")
        isr = cluster.wait_isr("pair", 0, 3, timeout=30)
        history.add("checker", "isr", "pair", note=f"ISR {isr}")
    finally:
        live.stop()
    problems += [f"producer crashed: {live.error!r}"] if live.error is not None else []
    records, ends = read_all(cluster.bootstrap_servers, "pair", 1)
    problems += check_exactly_once(history, "kafka-python", records)
    problems += check_identical_replicas(data_dirs(cluster), "pair", 0, ends[0])
    fail_on(history, problems)


@pytest.mark.timeout(120)
def test_a_restarting_node_accepts_no_client_before_it_has_joined(kafka_cluster, admin):
    """Nemesis: a node restarted while cut from etcd (blackhole), healed a few seconds later. Checker: until
    it has joined and follows the cluster's metadata, its client port accepts nothing -- before, it answered
    from its single-node view (Metadata naming itself leader of every partition on its disk, found by the
    nemesis run as two leaders at one leader epoch). Kafka's BrokerServer binds its sockets early and enables
    request processing (SocketServer.enableRequestProcessing) only once it has caught up with the metadata."""
    import socket
    import threading

    cluster = kafka_cluster
    create_topic(cluster, admin, "joining", [1, 2, 3])
    node = cluster.nodes[2]
    cluster.kill(2)
    cluster.wait_leader("joining", 0, not_on=2)
    cluster.cut(2, from_etcd=True, from_nodes=False)
    failure: list[BaseException] = []

    def restart() -> None:
        try:
            cluster.restart(2, timeout=60)
        except BaseException as exc:  # noqa: BLE001 -- reported by the test thread
            failure.append(exc)

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    refused = answered = 0
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:  # the node is up, its ports bound, etcd unreachable
        try:
            with socket.create_connection((node.host, node.port), timeout=0.5) as sock:
                sock.sendall(b"\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x01\x00\x02id")  # ApiVersions v0
                sock.settimeout(0.5)
                if sock.recv(4):
                    answered += 1
        except OSError:
            refused += 1
        time.sleep(0.1)
    cluster.heal(2)
    thread.join(60)
    assert not failure, failure
    assert answered == 0 and refused > 0, (answered, refused)
    cluster.wait_registered({1, 2, 3})
    leaders = {cluster.leader_of("joining", 0, via=via) for via in (1, 2, 3)}
    assert len(leaders) == 1, leaders
