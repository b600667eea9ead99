"""The transaction coordinator in a cluster (issue #27, transaction side; #26's markers to other nodes):
real etcd, 3 real kcoord nodes with 2 s sessions, a real confluent-kafka (librdkafka) consume-transform-
produce loop, faults by SIGKILL.

The loop (txn_eos_worker.py) commits its output records and its consumed positions in one transaction
every 100 inputs. Its transactional id is coordinated by the leader of its `__transaction_state`
partition, chosen here on another node than the group's coordinator (the group side moves with #27's
group work). Nemeses, one per test:
- SIGKILL of the transaction coordinator's node mid-run: a new leader of the partition loads it
  (TransactionCoordinator.onElection), completes what was prepared, and the loop carries on with it;
- SIGSTOP of the coordinator's node past its lease, then SIGCONT: it resigns and acknowledges nothing
  more for the id, whose new coordinator carries on;
- SIGKILL of the leader of an output partition (neither coordinator): the markers of the transactions in
  flight reach the partition's new leader (TransactionMarkerChannelManager retrying on
  NOT_LEADER_OR_FOLLOWER with fresh metadata).
Checker: every input appears exactly once in the read_committed output and no other record does (an
aborted record read would be a duplicate or a stranger), and the group's committed offsets reach the
input's end offsets. A worker that hits an abortable error exits and is replaced (same transactional id,
fencing the old epoch), as an application would; its aborted transactions must stay invisible.

Plus the wire rule the failover relies on: a WriteTxnMarkers whose coordinator epoch is older than the
last one a partition saw for the producer is refused with TRANSACTION_COORDINATOR_FENCED
(ProducerStateManager / ProducerAppendInfo.appendEndTxnMarker, storage/src/main/java/org/apache/kafka/
storage/internals/log/ProducerAppendInfo.java, checkCoordinatorEpoch -> TransactionCoordinatorFencedException).
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import subprocess
import sys
import threading
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402

from kcoord.protocol import messages as m  # noqa: E402
from kcoord.protocol.client import KafkaWireClient  # noqa: E402
from kcoord.protocol.errors import ErrorCode  # noqa: E402
from tests.broker.transactions.test_exactly_once_confluent import (  # noqa: E402
    _read_all,
    _wait_group_caught_up,
)
from tests.broker.transactions.txnwire import (  # noqa: E402
    add_offsets,
    add_partitions,
    end_txn,
    init_pid,
    init_until_ready,
)
from tests.support.raw_kafka import RawKafka  # noqa: E402

OVERRIDES = {"transaction.state.log.num.partitions": "5"}
pytestmark = [pytest.mark.slow, pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000, overrides=OVERRIDES)]

WORKER = os.path.join(os.path.dirname(__file__), "txn_eos_worker.py")
INPUTS = 4_000
PARTITIONS = 3
GROUP = "eos"
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]  # one partition led by each node


class Loop:
    """The worker process, replaced whenever it exits (until stopped); keeps its last output lines."""

    def __init__(self, bootstrap: str, txn_id: str) -> None:
        self.args = [sys.executable, WORKER, bootstrap, "in", "out", GROUP, txn_id, "100"]
        self.committed = 0  # inputs committed by all incarnations (as each reported them)
        self.exits: list[int] = []
        self.output: collections.deque[str] = collections.deque(maxlen=40)
        self._stopped = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Loop:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._proc = proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            base = self.committed
            assert proc.stdout is not None
            for line in proc.stdout:
                self.output.append(line)
                if line.startswith("committed "):
                    self.committed = base + int(line.split()[1])
            self.exits.append(proc.wait())

    def wait_committed(self, at_least: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.committed < at_least:
            if time.monotonic() > deadline:
                raise AssertionError(f"the loop did not commit {at_least} inputs (exits {self.exits}):\n"
                                     + "".join(self.output))
            time.sleep(0.1)

    def stop(self) -> None:
        self._stopped.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        self._thread.join(15)


def _create(cluster, name: str, assignment: list[list[int]]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name, replica_assignments=dict(enumerate(assignment)))])
    finally:
        admin.close()
    for p in range(len(assignment)):
        cluster.wait_isr(name, p, len(assignment[p]))


def _setup(cluster) -> None:
    for topic in ("in", "out"):
        _create(cluster, topic, ASSIGNMENT)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20})
    for i in range(INPUTS):
        producer.produce("in", key=b"%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _group_coordinator(cluster, group: str) -> int:
    def find() -> int:
        node = next(n for n in cluster.nodes.values() if n.running)
        with KafkaWireClient.connect(node.bootstrap_servers, timeout=10) as client:
            found = client.request(m.FindCoordinatorRequest(key_type=0, coordinator_keys=[group]),
                                   version=4).coordinators[0]
        return found.node_id if found.error_code == 0 else -1
    return cluster._poll(find, lambda n: n >= 0, 30, f"coordinator of {group}")


def _txn_id_away_from(cluster, node_id: int) -> tuple[str, int]:
    """A transactional id whose coordinator is not `node_id`, and its coordinator."""
    for i in range(100):
        txn_id = f"eos-{i}"
        coordinator = cluster.txn_coordinator_of(txn_id)
        if coordinator != node_id:
            return txn_id, coordinator
    raise AssertionError(f"every transactional id tried is coordinated by node {node_id}")


def _check_exactly_once(cluster, loop: Loop) -> None:
    print(f"worker incarnations replaced: {len(loop.exits)} (exit statuses {loop.exits})")
    ends = _wait_group_caught_up(cluster.bootstrap_servers, GROUP, "in")
    assert sum(ends) == INPUTS
    committed = _read_all(cluster.bootstrap_servers, "out", "read_committed", INPUTS)
    counts = collections.Counter(committed)
    strangers = set(counts) - {b"v%d!" % i for i in range(INPUTS)}
    assert not strangers, sorted(strangers)[:10]
    assert len(counts) == INPUTS, f"{INPUTS - len(counts)} inputs missing from the output"
    assert max(counts.values()) == 1, [v for v, c in counts.items() if c > 1][:10]


@dataclasses.dataclass
class Run:
    loop: Loop
    txn_id: str
    coordinator: int  # the transactional id's coordinator when the loop started
    group_node: int   # the group's coordinator


@contextlib.contextmanager
def _loop_under_test(cluster):
    """Topics and inputs, then the loop with a transactional id coordinated away from the group's
    coordinator; yields once it has committed 1,000 inputs (the body is the nemesis), then waits for every
    input and runs the checker."""
    _setup(cluster)
    group_node = _group_coordinator(cluster, GROUP)
    txn_id, coordinator = _txn_id_away_from(cluster, group_node)
    loop = Loop(cluster.bootstrap_servers, txn_id).start()
    try:
        loop.wait_committed(1_000)
        yield Run(loop, txn_id, coordinator, group_node)
        loop.wait_committed(INPUTS, timeout=240)
        _check_exactly_once(cluster, loop)
    finally:
        loop.stop()


@pytest.mark.timeout(400)
def test_sigkill_of_the_transaction_coordinator_node_exactly_once(kafka_cluster):
    """Nemesis: SIGKILL of the node leading the transactional id's `__transaction_state` partition, once the
    loop has committed 1,000 inputs. Checker: _check_exactly_once; the id is then coordinated elsewhere."""
    cluster = kafka_cluster
    with _loop_under_test(cluster) as run:
        at_kill, killed = run.loop.committed, time.monotonic()
        cluster.kill(run.coordinator)
        cluster.txn_coordinator_of(run.txn_id, not_on=run.coordinator)  # the partition failed over
        run.loop.wait_committed(at_kill + 1)
        print(f"first commit {time.monotonic() - killed:.2f} s after the SIGKILL of the coordinator's node")


@pytest.mark.timeout(400)
def test_the_transaction_coordinator_paused_past_its_lease_then_resumed_exactly_once(kafka_cluster):
    """Nemesis: SIGSTOP of the transaction coordinator's node until its partition has another leader, then
    SIGCONT: the old coordinator comes back having lost its lease, resigns everything at once
    (CoordinatorRoles.resign_all) and can no longer complete a write (its pending appends wait for an ISR
    that moved on). Checker: _check_exactly_once; the id stays coordinated elsewhere meanwhile."""
    cluster = kafka_cluster
    with _loop_under_test(cluster) as run:
        at_pause = run.loop.committed
        cluster.pause(run.coordinator)
        try:
            cluster.txn_coordinator_of(run.txn_id, not_on=run.coordinator, via=run.group_node)
        finally:
            cluster.resume(run.coordinator)  # now a node without a lease: it resigns on its next step
        run.loop.wait_committed(at_pause + 1)
        assert cluster.txn_coordinator_of(run.txn_id) != run.coordinator


@pytest.mark.timeout(400)
def test_sigkill_of_an_output_partition_leader_exactly_once(kafka_cluster):
    """Nemesis: SIGKILL of the leader of an output partition that neither coordinator leads, once the loop
    has committed 1,000 inputs. Checker: _check_exactly_once."""
    cluster = kafka_cluster
    with _loop_under_test(cluster) as run:
        victim = next(n for n in (1, 2, 3) if n not in (run.group_node, run.coordinator))
        assert victim in {cluster.leader_of("out", p) for p in range(PARTITIONS)}
        cluster.kill(victim)


def _write_marker(client: KafkaWireClient, producer_id: int, epoch: int, coordinator_epoch: int,
                  topic: str, partition: int) -> ErrorCode:
    Rq = m.WriteTxnMarkersRequest
    response = client.request(Rq(markers=[Rq.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=epoch, transaction_result=False, coordinator_epoch=coordinator_epoch,
        topics=[Rq.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])]), version=1)
    return ErrorCode(response.markers[0].topics[0].partitions[0].error_code)


def test_a_marker_of_an_older_coordinator_epoch_is_refused(kafka_cluster):
    """WriteTxnMarkers to a partition's leader: a marker at coordinator epoch 5 is written; then one of the
    same producer at coordinator epoch 4 is TRANSACTION_COORDINATOR_FENCED (ProducerAppendInfo.
    appendEndTxnMarker's checkCoordinatorEpoch), one at 5 or above is taken; on a follower the same
    request answers NOT_LEADER_OR_FOLLOWER (KafkaApis.handleWriteTxnMarkersRequest appends as leader)."""
    cluster = kafka_cluster
    _create(cluster, "fenced", [[1, 2, 3]])
    leader = cluster.leader_of("fenced", 0)
    follower = next(n for n in (1, 2, 3) if n != leader)
    with KafkaWireClient.connect(cluster.nodes[leader].bootstrap_servers, timeout=40) as client:
        assert _write_marker(client, 9001, 0, 5, "fenced", 0) == ErrorCode.NONE
        assert _write_marker(client, 9001, 0, 4, "fenced", 0) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
        assert _write_marker(client, 9001, 0, 6, "fenced", 0) == ErrorCode.NONE
        assert _write_marker(client, 9002, 0, 1, "fenced", 0) == ErrorCode.NONE  # per producer
    with KafkaWireClient.connect(cluster.nodes[follower].bootstrap_servers, timeout=40) as client:
        assert _write_marker(client, 9001, 0, 7, "fenced", 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # the new leader after a failover rebuilds the producer's coordinator epoch from its log
    cluster.kill(leader)
    new_leader = cluster.wait_leader("fenced", 0, not_on=leader)
    with KafkaWireClient.connect(cluster.nodes[new_leader].bootstrap_servers, timeout=40) as client:
        deadline = time.monotonic() + 30
        while (error := _write_marker(client, 9001, 0, 5, "fenced", 0)) in (
                ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
            assert time.monotonic() < deadline, error
            time.sleep(0.2)
        assert error == ErrorCode.TRANSACTION_COORDINATOR_FENCED


@pytest.mark.kcoord_shared_cluster
def test_the_transaction_apis_answer_not_coordinator_off_the_coordinator(kafka_cluster):
    """Kafka's front door for a transactional id on a broker that does not lead its `__transaction_state`
    partition (TransactionStateManager.getTransactionState -> NOT_COORDINATOR, which
    TransactionCoordinator's handlers and KafkaApis answer as is): InitProducerId, AddPartitionsToTxn,
    AddOffsetsToTxn, EndTxn and DescribeTransactions; ListTransactions lists only the ids of partitions
    the broker leads. On the coordinator the same id is served."""
    cluster = kafka_cluster
    _create(cluster, "front", [[1, 2, 3]])
    txn_id = "front-door"
    coordinator = cluster.txn_coordinator_of(txn_id)
    with RawKafka(cluster.nodes[coordinator].port) as raw:
        error, pid, epoch = init_until_ready(raw, txn_id)
        assert error == ErrorCode.NONE
    for node_id in (n for n in cluster.nodes if n != coordinator):
        with RawKafka(cluster.nodes[node_id].port) as raw:
            assert init_pid(raw, txn_id)[0] == ErrorCode.NOT_COORDINATOR
            assert add_partitions(raw, txn_id, pid, epoch, [("front", 0)]) == {("front", 0): ErrorCode.NOT_COORDINATOR}
            assert add_offsets(raw, txn_id, pid, epoch, "g") == ErrorCode.NOT_COORDINATOR
            assert end_txn(raw, txn_id, pid, epoch, True) == ErrorCode.NOT_COORDINATOR
            described = raw.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=[txn_id]))
            assert described.transaction_states[0].error_code == ErrorCode.NOT_COORDINATOR
            listed = raw.request(66, 1, m.ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                                                  duration_filter=-1))
            assert txn_id not in {t.transactional_id for t in listed.transaction_states}
    with RawKafka(cluster.nodes[coordinator].port) as raw:
        assert add_partitions(raw, txn_id, pid, epoch, [("front", 0)]) == {("front", 0): ErrorCode.NONE}
        described = raw.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=[txn_id]))
        assert described.transaction_states[0].transaction_state == "Ongoing"
        listed = raw.request(66, 1, m.ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                                              duration_filter=-1))
        assert txn_id in {t.transactional_id for t in listed.transaction_states}


def _produce_v13(raw, txn_id: str, topic_id, pid: int, epoch: int, partition: int, sequence: int) -> ErrorCode:
    from kcoord.protocol.records import build_batch

    batch = build_batch([(None, b"x")], producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                        transactional=True)
    R = m.ProduceRequest
    response = raw.request(0, 13, R(transactional_id=txn_id, acks=-1, timeout_ms=10000, topic_data=[
        R.TopicProduceData(topic_id=topic_id, partition_data=[R.TopicProduceData.PartitionProduceData(
            index=partition, records=batch)])]))
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


@pytest.mark.kcoord_shared_cluster
def test_a_transactional_produce_is_verified_by_the_coordinator_on_another_node(kafka_cluster):
    """KIP-890 verification across nodes (ReplicaManager.appendRecords ->
    AddPartitionsToTxnManager.verifyTransaction, core/src/main/scala/kafka/server/): a partition leader
    that is not the transactional id's coordinator asks the coordinator's node (AddPartitionsToTxn v4,
    verify_only) and takes a transactional batch only for a partition in the ongoing transaction; one that
    is not in it is refused INVALID_TXN_STATE. Produce by topic name (v9) and by topic id (v13).
    Transaction version 2 across nodes: Produce v13 (above v11, KafkaApis' addPartition operation) has the
    coordinator's node add the partition (AddPartitionsToTxn v5, not verify_only); EndTxn v5 bumps the
    epoch and the markers reach the other node as WriteTxnMarkers v2 of TransactionVersion 2, after which a
    late batch of the old epoch is refused (ProducerAppendInfo.checkProducerEpoch)."""
    from tests.broker.transactions.txnwire import produce_txn

    cluster = kafka_cluster
    txn_id = "verified"
    coordinator = cluster.txn_coordinator_of(txn_id)
    other, third = (n for n in (1, 2, 3) if n != coordinator)
    _create(cluster, "verified", [[other, coordinator, third], [other, third, coordinator]])
    assert cluster.leader_of("verified", 0) == other and cluster.leader_of("verified", 1) == other
    with RawKafka(cluster.nodes[coordinator].port) as raw:
        _, pid, epoch = init_until_ready(raw, txn_id)
        assert add_partitions(raw, txn_id, pid, epoch, [("verified", 0)]) == {("verified", 0): ErrorCode.NONE}
    topic_id = next(t.topic_id for t in cluster.metadata(topics=["verified"]).topics)
    with RawKafka(cluster.nodes[other].port) as raw:
        assert produce_txn(raw, txn_id, pid, epoch, "verified", 0, [b"a", b"b"]) == ErrorCode.NONE
        assert _produce_v13(raw, txn_id, topic_id, pid, epoch, 0, 2) == ErrorCode.NONE
        assert produce_txn(raw, txn_id, pid, epoch, "verified", 1, [b"c"]) == ErrorCode.INVALID_TXN_STATE
        assert produce_txn(raw, txn_id, pid, epoch + 1, "verified", 0, [b"d"], sequence=3) == \
            ErrorCode.INVALID_PRODUCER_EPOCH  # PRODUCER_FENCED from the coordinator, as the produce maps it
        assert _produce_v13(raw, txn_id, topic_id, pid, epoch, 1, 0) == ErrorCode.NONE  # added by the coordinator
    with RawKafka(cluster.nodes[coordinator].port) as raw:
        described = raw.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=[txn_id]))
        assert sorted((t.topic, p) for t in described.transaction_states[0].topics for p in t.partitions) == [
            ("verified", 0), ("verified", 1)]
        ended = raw.request(26, 5, m.EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                                   committed=True))
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (ErrorCode.NONE, pid, epoch + 1)
    with RawKafka(cluster.nodes[other].port) as raw:
        def stable_at_end() -> bool:
            Rq = m.ListOffsetsRequest
            ends = [raw.request(2, 7, Rq(replica_id=-1, isolation_level=level, topics=[Rq.ListOffsetsTopic(
                name="verified", partitions=[Rq.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=1, timestamp=-1, current_leader_epoch=-1)])])).topics[0].partitions[0].offset
                for level in (0, 1)]
            return ends[0] == ends[1] == 2  # the record and its commit marker, read_committed to the end
        cluster._poll(stable_at_end, bool, 30, "the commit marker on verified-1")
        assert _produce_v13(raw, txn_id, topic_id, pid, epoch, 1, 1) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_tv2_end_retried_on_the_next_coordinator_is_recognised(kafka_cluster):
    """Transaction version 2 across a coordinator failover: the TV2 state (the bumped epoch, the client's
    transaction version) travels in `__transaction_state` value v1 (TransactionLogValue.json, tagged
    ClientTransactionVersion), so after the SIGKILL of the coordinator's node the new coordinator loads it
    and recognises the client's retry of EndTxn v5 with the epoch before the bump
    (TransactionCoordinator.endTransaction, endTxnEpochBumped), answering the bumped epoch; the commit
    marker reached the data partition, which read_committed then reads to its end."""
    from tests.broker.transactions.txnwire import produce_txn

    cluster = kafka_cluster
    txn_id = "tv2-failover"
    coordinator = cluster.txn_coordinator_of(txn_id)
    other, third = (n for n in (1, 2, 3) if n != coordinator)
    _create(cluster, "tv2f", [[other, third, coordinator]])
    with RawKafka(cluster.nodes[coordinator].port) as raw:
        _, pid, epoch = init_until_ready(raw, txn_id)
    with RawKafka(cluster.nodes[other].port) as raw:
        assert produce_txn(raw, txn_id, pid, epoch, "tv2f", 0, [b"a"], version=12) == ErrorCode.NONE

    def end(node: int, at_epoch: int, commit: bool) -> tuple[int, int, int]:
        with RawKafka(cluster.nodes[node].port) as raw:
            r = raw.request(26, 5, m.EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=at_epoch,
                                                   committed=commit))
        return r.error_code, r.producer_id, r.producer_epoch

    assert end(coordinator, epoch, True) == (ErrorCode.NONE, pid, epoch + 1)
    cluster.kill(coordinator)
    successor = cluster.txn_coordinator_of(txn_id, not_on=coordinator)
    loading = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
               ErrorCode.COORDINATOR_NOT_AVAILABLE}
    retried = cluster._poll(lambda: end(successor, epoch, True), lambda r: r[0] not in loading, 30,
                            "the retried EndTxn on the new coordinator")
    assert retried == (ErrorCode.NONE, pid, epoch + 1)
    assert end(successor, epoch + 1, True)[0] == ErrorCode.INVALID_TXN_STATE  # nothing added since
    with RawKafka(cluster.nodes[other].port) as raw:
        def ends() -> list[int]:
            Rq = m.ListOffsetsRequest
            return [raw.request(2, 7, Rq(replica_id=-1, isolation_level=level, topics=[Rq.ListOffsetsTopic(
                name="tv2f", partitions=[Rq.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, timestamp=-1, current_leader_epoch=-1)])])).topics[0].partitions[0].offset
                for level in (0, 1)]
        assert cluster._poll(ends, lambda e: e == [2, 2], 30, "the commit marker on tv2f-0") == [2, 2]
