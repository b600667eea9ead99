"""A Jepsen-style run (issue #26 / #27): real etcd and 3 real kcoord nodes (2 s sessions, links through
kcoord.testkit.links proxies), under an idempotent acks=all producer (kafka-python) and a consumer group
committing what it consumed, while a seeded nemesis picks a node and a fault, over and over: SIGKILL (then
a restart on its data), SIGSTOP past its lease (then SIGCONT), or its links cut -- from etcd and the
other nodes, from etcd only, from the other nodes only, from one other node; blackholed or reset -- then
healed; or etcd itself SIGKILLed (then restarted on its data). The first
fault hits the group coordinator's node. A sampler asks every node for Metadata, every node for the group's
offsets (which only its coordinator serves: at most one node per coordinator epoch), and the group's
coordinator for OffsetFetch all along. Then every fault is lifted, the ISR fills, everything is read back.

One run per module (a module-scoped fixture); each property of tests/cluster/nemesis_checks.py is a test
of its own, so one that does not hold yet is marked as such without hiding the others.

    KCOORD_NEMESIS_SEED=1234 KCOORD_NEMESIS_STEPS=12 pytest tests/cluster/test_nemesis_e2e.py -s

The seed is printed at the start of the run and in every failure."""
from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.consumer_offsets import partition_for
from kcoord.protocol.errors import ErrorCode
from tests.cluster.nemesis_checks import (
    Ack,
    CoordinatorSample,
    LeaderSample,
    OffsetSample,
    committed_offset_regressions,
    duplicate_writes,
    lost_writes,
    two_active_coordinators_at_one_epoch,
    two_leaders_at_one_epoch,
)
from tests.cluster.replication_checks import History, Producer, check_identical_replicas, read_all, wait_until

pytestmark = [pytest.mark.slow]

TOPIC, PARTITIONS, GROUP = "jepsen", 3, "jepsen-group"
STEPS = int(os.environ.get("KCOORD_NEMESIS_STEPS", "8"))
FAULTS = ("kill", "pause", "cut", "cut-etcd", "cut-nodes", "cut-pair", "etcd-kill")


@dataclass
class Run:
    seed: int
    history: History
    workdir: str = ""
    records: list[tuple[int, int, str]] = field(default_factory=list)
    ends: dict[int, int] = field(default_factory=dict)
    offsets: list[OffsetSample] = field(default_factory=list)
    leaders: list[LeaderSample] = field(default_factory=list)
    coordinators: list[CoordinatorSample] = field(default_factory=list)
    replica_problems: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)

    def acks(self) -> list[Ack]:
        return [Ack(e.value, e.partition, e.offset) for e in self.history.of("kafka-python", "ack")]

    def fail(self, problems: list[str]) -> None:
        if problems:
            pytest.fail(f"seed {self.seed} (KCOORD_NEMESIS_SEED={self.seed} to run it again); logs in {self.workdir}\n"
                        + "\n".join(problems[:50]) + "\n--- history ---\n" + self.history.text(problems))


class Committer(threading.Thread):
    """A kafka-python group member consuming TOPIC and committing each poll's positions (synchronously);
    every acknowledged commit becomes an OffsetSample of source "commit"."""

    def __init__(self, bootstrap: str, history: History, samples: list[OffsetSample]) -> None:
        super().__init__(name="committer", daemon=True)
        self.bootstrap, self.history, self.samples = bootstrap, history, samples
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.structs import OffsetAndMetadata

        consumer = KafkaConsumer(TOPIC, bootstrap_servers=self.bootstrap, group_id=GROUP, enable_auto_commit=False,
                                 auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000,
                                 request_timeout_ms=10_000, metadata_max_age_ms=5_000)
        consumer.partitions_for_topic(TOPIC)  # before the first join: see tests/test_example_app.py's App
        try:
            while not self.stopping.is_set():
                batches = consumer.poll(timeout_ms=300, max_records=200)
                if not batches:
                    continue
                offsets = {tp: OffsetAndMetadata(records[-1].offset + 1, "", -1) for tp, records in batches.items()}
                sent = time.monotonic() - self.history.started
                try:
                    consumer.commit(offsets)
                except Exception as exc:  # a failed commit is part of the history, not an error
                    self.history.add("committer", "fail", note=repr(exc))
                    continue
                answered = time.monotonic() - self.history.started
                for tp, meta in offsets.items():  # in the samples only: the history is for what a failure prints
                    self.samples.append(OffsetSample(sent, answered, tp.partition, meta.offset, "commit"))
        except BaseException as exc:  # reported by the run
            self.error = exc
        finally:
            consumer.close(autocommit=False)


class Sampler(threading.Thread):
    """Every 250 ms: Metadata from every node (TOPIC and __consumer_offsets) with an OffsetFetch of GROUP
    sent to that same node between it and a second Metadata (a CoordinatorSample when both name the same
    epoch for the group's partition), and OffsetFetch of GROUP from its coordinator. A node that does not
    answer within a second (paused, killed) is skipped."""

    def __init__(self, cluster, run: Run) -> None:
        super().__init__(name="sampler", daemon=True)
        self.cluster, self.run_ = cluster, run
        self.stopping = threading.Event()

    def now(self) -> float:
        return time.monotonic() - self.run_.history.started

    def run(self) -> None:
        while not self.stopping.is_set():
            for node_id, node in self.cluster.nodes.items():
                self._leaders(node_id, node.bootstrap_servers)
            self._offsets()
            self.stopping.wait(0.25)

    def _leaders(self, node_id: int, address: str) -> None:
        request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=t)
                                            for t in (TOPIC, "__consumer_offsets")],
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        R = m.OffsetFetchRequest
        try:
            with KafkaWireClient.connect(address, timeout=1.0) as client:
                response = client.request(request, version=12)
                t = self.now()
                served = client.request(R(groups=[R.OffsetFetchRequestGroup(group_id=GROUP, topics=None)],
                                          require_stable=False), version=8).groups[0].error_code
                after = client.request(request, version=12)
        except Exception:  # down, paused, killed: no sample
            return
        self.run_.leaders += [LeaderSample(t, node_id, topic.name, p.partition_index, p.leader_id, p.leader_epoch)
                              for topic in response.topics if topic.error_code == 0 for p in topic.partitions]
        epochs = [_group_partition_epoch(r) for r in (response, after)]
        if epochs[0] is not None and epochs[0] == epochs[1]:
            self.run_.coordinators.append(CoordinatorSample(t, node_id, served == ErrorCode.NONE, epochs[0]))

    def _offsets(self) -> None:
        sent = self.now()
        try:
            committed = _offset_fetch(self.cluster)
        except Exception:  # no coordinator reachable now: no sample
            return
        if committed is None:
            return
        answered = self.now()
        self.run_.offsets += [OffsetSample(sent, answered, p, committed.get(p, -1)) for p in range(PARTITIONS)]


def _group_partition_epoch(response) -> int | None:
    """The leader epoch of GROUP's `__consumer_offsets` partition in a Metadata response (None: not there)."""
    for topic in response.topics:
        if topic.name == "__consumer_offsets" and topic.error_code == 0 and topic.partitions:
            wanted = partition_for(GROUP, len(topic.partitions))
            return next((p.leader_epoch for p in topic.partitions if p.partition_index == wanted), None)
    return None


def _offset_fetch(cluster) -> dict[int, int] | None:
    """GROUP's committed offsets of TOPIC from its coordinator (found through any node that answers);
    None if no coordinator answered without an error."""
    for node in cluster.nodes.values():
        try:
            with KafkaWireClient.connect(node.bootstrap_servers, timeout=1.0) as client:
                found = client.request(m.FindCoordinatorRequest(key=GROUP, key_type=0, coordinator_keys=[GROUP]),
                                       version=4).coordinators[0]
        except OSError:
            continue
        if found.error_code != ErrorCode.NONE:
            return None
        with KafkaWireClient.connect(f"{found.host}:{found.port}", timeout=1.0) as client:
            R = m.OffsetFetchRequest
            response = client.request(R(groups=[R.OffsetFetchRequestGroup(group_id=GROUP, topics=None)],
                                        require_stable=False), version=8)
        group = response.groups[0]
        if group.error_code != ErrorCode.NONE:
            return None
        return {p.partition_index: p.committed_offset for t in group.topics if t.name == TOPIC
                for p in t.partitions if p.error_code == ErrorCode.NONE}
    return None


def _nemesis(cluster, run: Run, rng: random.Random) -> None:
    nodes = sorted(cluster.nodes)
    for step in range(STEPS):
        if step == 0:  # the group coordinator's node first: the fault #27 is about
            node, fault = cluster.leader_of("__consumer_offsets", 0), "kill"
        else:
            node, fault = rng.choice(nodes), rng.choice(FAULTS)
        mode = rng.choice(("blackhole", "reset"))
        hold = rng.uniform(2.5, 5.0)
        peer = rng.choice([n for n in nodes if n != node])
        what = ("etcd-kill" if fault == "etcd-kill" else f"{fault} node {node}"
                + (f" from node {peer}" if fault == "cut-pair" else "") + (f" ({mode})" if fault.startswith("cut") else ""))
        run.faults.append(what)
        run.history.add("nemesis", "start", what, note=f"step {step}, {hold:.1f} s")
        if fault == "kill":
            cluster.kill(node)
        elif fault == "etcd-kill":
            cluster.etcd.kill()
        elif fault == "pause":
            cluster.pause(node)
        elif fault == "cut-pair":
            cluster.cut(node, from_etcd=False, from_nodes={peer}, mode=mode)
        else:
            cluster.cut(node, from_etcd=fault != "cut-nodes", from_nodes=fault != "cut-etcd", mode=mode)
        time.sleep(hold)
        if fault == "kill":
            cluster.restart(node)
        elif fault == "etcd-kill":
            cluster.etcd.start()
        elif fault == "pause":
            cluster.resume(node)
        else:
            cluster.heal(node)
        run.history.add("nemesis", "end", what)
        for p in range(PARTITIONS):  # the next fault once the partitions can take acks=all writes again
            cluster.wait_isr(TOPIC, p, 3, timeout=60)
        time.sleep(rng.uniform(0.5, 2.0))


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    from kafka.admin import KafkaAdminClient, NewTopic

    from kcoord.testkit.cluster import KafkaCluster
    from kcoord.testkit.etcd import INSTALL_HINT, etcd_binary

    if etcd_binary() is None:
        pytest.skip(INSTALL_HINT)
    seed = int(os.environ.get("KCOORD_NEMESIS_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"\nnemesis seed {seed} (KCOORD_NEMESIS_SEED={seed} to run it again)")
    workdir = tmp_path_factory.mktemp("nemesis")
    run = Run(seed, History(), str(workdir))
    cluster = KafkaCluster(workdir, nodes=3, session_timeout_ms=2000, links=True,
                           overrides={"offsets.topic.replication.factor": "3"}).start()
    producer = committer = sampler = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.close()
        for p in range(PARTITIONS):
            cluster.wait_isr(TOPIC, p, 3)
        producer = Producer("kafka-python", cluster.bootstrap_servers, TOPIC, run.history, rate=100)
        committer = Committer(cluster.bootstrap_servers, run.history, run.offsets)
        sampler = Sampler(cluster, run)
        for thread in (producer, committer, sampler):
            thread.start()
        wait_until(lambda: any(s.source == "commit" for s in run.offsets), 60, "the group's first commit")
        wait_until(lambda: any(s.offset > 0 for s in run.offsets if s.source == "fetch"), 30,
                   "a committed offset seen by OffsetFetch")
        _nemesis(cluster, run, random.Random(seed))
        time.sleep(2.0)  # writes and commits after the last fault
    finally:
        for thread in (producer, committer, sampler):
            if thread is not None:
                thread.stopping.set()
        for thread in (producer, committer, sampler):
            if thread is not None:
                thread.join(150)
        try:
            run.crashes += [f"{t.name} crashed: {t.error!r}" for t in (producer, committer)
                            if t is not None and t.error is not None]
            for p in range(PARTITIONS):
                cluster.wait_isr(TOPIC, p, 3, timeout=60)
            run.records, run.ends = read_all(cluster.bootstrap_servers, TOPIC, PARTITIONS)
            dirs = {n: cluster.data_dir(n) for n in cluster.nodes}
            for p in range(PARTITIONS):
                run.replica_problems += check_identical_replicas(dirs, TOPIC, p, run.ends[p])
        finally:
            cluster.stop()
    run.history.add("checker", "read", TOPIC, note=f"{len(run.records)} records, ends {run.ends}; faults: {run.faults}")
    print(f"nemesis seed {seed}: {len(run.acks())} acknowledged writes, {len(run.records)} read; faults {run.faults}")
    return run


def test_the_run_did_what_it_claims(run):
    """Not a property: the nemesis ran every step and the clients kept working through it."""
    acks = run.acks()
    problems = list(run.crashes)
    if len(run.faults) != STEPS:
        problems.append(f"{len(run.faults)} faults of {STEPS}")
    if len(acks) < 50 * STEPS:
        problems.append(f"only {len(acks)} acknowledged writes in {STEPS} steps")
    if not any(e.t > run.history.of("nemesis", "end")[-1].t for e in run.history.of("kafka-python", "ack")):
        problems.append("no acknowledged write after the last fault")
    run.fail(problems)


def test_no_acknowledged_write_is_lost(run):
    run.fail(lost_writes(run.acks(), run.records))


def test_the_idempotent_output_has_no_duplicates(run):
    run.fail(duplicate_writes(run.records))


def test_never_two_leaders_at_one_leader_epoch(run):
    run.fail(two_leaders_at_one_epoch(run.leaders))


def test_replicas_are_identical_up_to_the_high_watermark(run):
    run.fail(run.replica_problems)


def test_never_two_active_coordinators_at_one_epoch(run):
    assert any(s.active for s in run.coordinators), "no node was ever seen serving the group"
    run.fail(two_active_coordinators_at_one_epoch(run.coordinators))


def test_committed_offsets_never_regress(run):
    run.fail(committed_offset_regressions(run.offsets))
