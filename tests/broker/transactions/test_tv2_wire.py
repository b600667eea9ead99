"""Transaction version 2 (KIP-890 part 2) at the wire, against a real kcoord over TCP.

The client side here does what Kafka's Java producer does (clients/.../producer/internals/
TransactionManager.java: maybeUpdateTransactionV2Enabled reads the finalized `transaction.version` from
ApiVersions; at 2 it sends EndTxn v5 and takes the producer id and epoch from its response, Produce v12 and
TxnOffsetCommit v5 without AddPartitionsToTxn / AddOffsetsToTxn; below 2 the version-1 path).
Broker rules followed: core/.../server/KafkaApis.scala (handleEndTxnRequest: EndTxn above v4 is TV_2;
handleProduceRequest: Produce above v11 adds its partitions, transactionSupportedOperation = addPartition;
handleTxnOffsetCommitRequest: v5 adds the group's partition; handleWriteTxnMarkersRequest v2's
TransactionVersion), core/.../transaction/TransactionCoordinator.scala (endTransaction's TV2 epoch rules),
storage/.../log/ProducerAppendInfo.java (checkProducerEpoch: a TV2 marker must be above the producer's
epoch, KAFKA-19446 / KIP-1228), server-common/.../TransactionVersion.java (levels 0-2, TV_2 the default).
"""
from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.testkit.waiting import wait_until
from tests.broker.test_features import api_versions
from tests.broker.transactions.txnwire import (
    add_offsets,
    add_partitions,
    init_until_ready,
    produce_txn,
    txn_commit,
)
from tests.support.raw_kafka import RawKafka

TOPIC = "tv2"
END_TXN = 26


def create_topic(port: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    with AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}) as admin:
        for f in admin.create_topics([NewTopic(TOPIC, 2)]).values():
            f.result(30)


def end_txn(raw, txn_id, pid, epoch, commit, version):
    resp = raw.request(END_TXN, version, m.EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit))
    if version >= 5:
        return resp.error_code, resp.producer_id, resp.producer_epoch
    return resp.error_code, pid, epoch  # v4 carries no producer: the client keeps its own


def latest(raw, partition: int, isolation: int) -> int:
    Rq = m.ListOffsetsRequest
    resp = raw.request(2, 7, Rq(replica_id=-1, isolation_level=isolation, topics=[Rq.ListOffsetsTopic(
        name=TOPIC, partitions=[Rq.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition, timestamp=-1,
                                                                          current_leader_epoch=-1)])]))
    return resp.topics[0].partitions[0].offset


def stable_offset(raw, group: str) -> tuple[int, int]:
    Rq = m.OffsetFetchRequest
    resp = raw.request(9, 7, Rq(group_id=group, require_stable=True, topics=[
        Rq.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]))
    p = resp.topics[0].partitions[0]
    return p.error_code, p.committed_offset


def wait_stable(raw, group: str, offset: int) -> None:
    wait_until(lambda: stable_offset(raw, group) == (E.NONE, offset), 10, f"{group}'s offset {offset}, stable")


class Producer:
    """A transactional producer that chooses its path by the finalized transaction.version, as Java's does."""

    def __init__(self, port: int, txn_id: str) -> None:
        self.port = port
        self.txn_id = txn_id
        self.raw = RawKafka(port)
        error, self.pid, self.epoch = init_until_ready(self.raw, txn_id)
        assert error == E.NONE
        self.sequence = 0  # per (producer id, epoch): a new epoch starts at 0
        self.end_versions: list[int] = []

    def transaction_version(self) -> int:
        finalized = {f.name: f.max_version_level for f in api_versions(self.port, 4).finalized_features}
        return finalized.get("transaction.version", 0)

    def run(self, value: bytes, group: str, offset: int) -> None:
        tv2 = self.transaction_version() >= 2
        tp = (TOPIC, 0)
        if tv2:  # implicit adds: nothing before the data
            assert produce_txn(self.raw, self.txn_id, self.pid, self.epoch, *tp, [value], self.sequence,
                               version=12) == E.NONE
            assert txn_commit(self.raw, self.txn_id, self.pid, self.epoch, group, {tp: offset}, version=5) == {
                tp: E.NONE}
        else:
            # the version-1 path needs its adds: a Produce v11 without one is refused
            assert produce_txn(self.raw, self.txn_id, self.pid, self.epoch, *tp, [value], self.sequence,
                               version=11) == E.INVALID_TXN_STATE
            assert add_partitions(self.raw, self.txn_id, self.pid, self.epoch, [tp]) == {tp: E.NONE}
            assert produce_txn(self.raw, self.txn_id, self.pid, self.epoch, *tp, [value], self.sequence,
                               version=11) == E.NONE
            assert add_offsets(self.raw, self.txn_id, self.pid, self.epoch, group) == E.NONE
            assert txn_commit(self.raw, self.txn_id, self.pid, self.epoch, group, {tp: offset}, version=4) == {
                tp: E.NONE}
        self.sequence += 1
        version = 5 if tv2 else 4
        error, pid, epoch = end_txn(self.raw, self.txn_id, self.pid, self.epoch, True, version)
        assert error == E.NONE
        if (pid, epoch) != (self.pid, self.epoch):
            self.pid, self.epoch, self.sequence = pid, epoch, 0
        self.end_versions.append(version)

    def close(self) -> None:
        self.raw.close()


def test_update_features_switches_the_producer_between_end_txn_v5_and_v4(kcoord_server):
    """Acceptance (issue #29): describe_features shows transaction.version finalized at 2 on a new node;
    the producer then ends with EndTxn v5 (its epoch bumped by each), after update_features to 1 with
    EndTxn v4 (epoch kept, explicit adds needed), and with v5 again after the upgrade back to 2. Every
    transaction's record and offset commit become visible to read_committed."""
    port = kcoord_server.port
    create_topic(port)
    admin = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap)
    producer = Producer(port, "tv-switch")
    try:
        assert admin.describe_features()["transaction.version"] == {
            "supported": (0, 2), "finalized": (2, 2), "finalized_epoch": 0}
        first = producer.epoch
        producer.run(b"a", "tv-group", 1)
        producer.run(b"b", "tv-group", 2)
        assert (producer.end_versions, producer.epoch) == ([5, 5], first + 2)
        wait_stable(producer.raw, "tv-group", 2)

        assert admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)}) == {"transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (1, 1)
        producer.run(b"c", "tv-group", 3)
        producer.run(b"d", "tv-group", 4)
        assert (producer.end_versions[2:], producer.epoch) == ([4, 4], first + 2)
        wait_stable(producer.raw, "tv-group", 4)

        assert admin.update_features({"transaction.version": 2}) == {"transaction.version": "OK"}
        producer.run(b"e", "tv-group", 5)
        assert (producer.end_versions[4:], producer.epoch) == ([5], first + 3)
        wait_stable(producer.raw, "tv-group", 5)
        # five records and five markers, all committed: read_committed reaches the end
        assert latest(producer.raw, 0, 1) == latest(producer.raw, 0, 0) == 10
    finally:
        producer.close()
        admin.close()


@pytest.fixture(scope="module")
def raw(kcoord_shared_server):
    create_topic(kcoord_shared_server.port)
    with RawKafka(kcoord_shared_server.port) as r:
        init_until_ready(r, "warm-up")
        yield r


def test_end_txn_v5_bumps_the_epoch_and_recognises_its_retry(raw):
    """TransactionCoordinator.endTransaction at TV2: the answer carries epoch + 1; a retry with the old epoch
    (endTxnEpochBumped) gets the same answer, the other outcome INVALID_TXN_STATE. At the new epoch nothing
    was added: a commit is INVALID_TXN_STATE, an abort goes through an empty PrepareAbort and bumps again
    (KAFKA-14563: a TV2 client cannot know whether its implicit adds happened); an older epoch is fenced."""
    _, pid, epoch = init_until_ready(raw, "t-v5")
    assert produce_txn(raw, "t-v5", pid, epoch, TOPIC, 1, [b"x"], version=12) == E.NONE
    assert end_txn(raw, "t-v5", pid, epoch, True, 5) == (E.NONE, pid, epoch + 1)
    assert end_txn(raw, "t-v5", pid, epoch, True, 5) == (E.NONE, pid, epoch + 1)
    assert end_txn(raw, "t-v5", pid, epoch, False, 5) == (E.INVALID_TXN_STATE, -1, -1)
    assert end_txn(raw, "t-v5", pid, epoch + 1, True, 5) == (E.INVALID_TXN_STATE, -1, -1)
    assert end_txn(raw, "t-v5", pid, epoch + 1, False, 5) == (E.NONE, pid, epoch + 2)
    assert end_txn(raw, "t-v5", pid, epoch + 1, False, 5) == (E.NONE, pid, epoch + 2)  # its retry
    assert end_txn(raw, "t-v5", pid, epoch, True, 5) == (E.PRODUCER_FENCED, -1, -1)
    assert end_txn(raw, "t-v5", pid + 1000, epoch, True, 5) == (E.INVALID_PRODUCER_ID_MAPPING, -1, -1)


def test_a_late_write_of_the_old_epoch_is_fenced_by_the_bumped_marker(raw):
    """KIP-890 part 2's point: the marker carries epoch + 1, so a batch of the transaction that was ended,
    arriving late, is refused (INVALID_PRODUCER_EPOCH: the coordinator's PRODUCER_FENCED as
    ReplicaManager maps it) instead of joining the next transaction; the next one runs at epoch + 1."""
    _, pid, epoch = init_until_ready(raw, "t-late")
    assert produce_txn(raw, "t-late", pid, epoch, TOPIC, 1, [b"x"], version=12) == E.NONE
    assert end_txn(raw, "t-late", pid, epoch, False, 5) == (E.NONE, pid, epoch + 1)
    assert produce_txn(raw, "t-late", pid, epoch, TOPIC, 1, [b"late"], sequence=1, version=12) == \
        E.INVALID_PRODUCER_EPOCH
    assert produce_txn(raw, "t-late", pid, epoch + 1, TOPIC, 1, [b"next"], version=12) == E.NONE
    assert end_txn(raw, "t-late", pid, epoch + 1, True, 5) == (E.NONE, pid, epoch + 2)
    # nothing left open once the markers are written (EndTxn answers before them, as Kafka's)
    wait_until(lambda: latest(raw, 1, 1) == latest(raw, 1, 0), 10, "the last stable offset at the end")


def test_produce_v12_adds_implicitly_and_v11_still_needs_the_add(raw):
    """Produce above v11 adds the partition (addPartition); v11 keeps KIP-890 part 1's verification."""
    _, pid, epoch = init_until_ready(raw, "t-implicit")
    assert produce_txn(raw, "t-implicit", pid, epoch, TOPIC, 0, [b"x"], version=11) == E.INVALID_TXN_STATE
    assert produce_txn(raw, "t-implicit", pid, epoch, TOPIC, 0, [b"x"], version=12) == E.NONE
    assert produce_txn(raw, "t-implicit", pid, epoch, TOPIC, 0, [b"y"], sequence=1, version=11) == E.NONE
    Rq = m.DescribeTransactionsRequest
    described = raw.request(65, 0, Rq(transactional_ids=["t-implicit"])).transaction_states[0]
    assert (described.transaction_state, [(t.topic, t.partitions) for t in described.topics]) == (
        "Ongoing", [(TOPIC, [0])])
    assert end_txn(raw, "t-implicit", pid, epoch, True, 5)[0] == E.NONE


def test_txn_offset_commit_v5_adds_the_group(raw):
    """TxnOffsetCommit v5 adds the group's __consumer_offsets partition itself; v4 still answers
    INVALID_TXN_STATE without AddOffsetsToTxn. The offset is pending until the commit marker."""
    _, pid, epoch = init_until_ready(raw, "t-offsets5")
    group = "tv2-offsets"
    assert txn_commit(raw, "t-offsets5", pid, epoch, group, {(TOPIC, 0): 7}, version=4) == {
        (TOPIC, 0): E.INVALID_TXN_STATE}
    assert txn_commit(raw, "t-offsets5", pid, epoch, group, {(TOPIC, 0): 7}, version=5) == {(TOPIC, 0): E.NONE}
    assert stable_offset(raw, group) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert end_txn(raw, "t-offsets5", pid, epoch, True, 5) == (E.NONE, pid, epoch + 1)
    wait_stable(raw, group, 7)


def _marker(raw, version, pid, epoch, transaction_version=0):
    Rq = m.WriteTxnMarkersRequest
    resp = raw.request(27, version, Rq(markers=[Rq.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
        transaction_version=transaction_version,
        topics=[Rq.WritableTxnMarker.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[1])])]))
    return resp.markers[0].topics[0].partitions[0].error_code


def test_write_txn_markers_v2_refuses_a_tv2_marker_at_the_producers_epoch(raw):
    """WriteTxnMarkers v2 (KIP-1228): a marker of TransactionVersion 2 must carry an epoch above the
    producer's at the partition (a TV2 end always bumps); a legacy one (v1, or TransactionVersion 0-1 at
    v2) only one not below it."""
    _, pid, epoch = init_until_ready(raw, "t-marker2")
    assert produce_txn(raw, "t-marker2", pid, epoch, TOPIC, 1, [b"x"], version=12) == E.NONE
    assert _marker(raw, 2, pid, epoch, transaction_version=2) == E.INVALID_PRODUCER_EPOCH
    assert _marker(raw, 2, pid, epoch - 1, transaction_version=0) == E.INVALID_PRODUCER_EPOCH
    assert _marker(raw, 2, pid, epoch, transaction_version=1) == E.NONE  # ends the open transaction
    assert _marker(raw, 1, pid, epoch) == E.NONE
    assert _marker(raw, 2, pid, epoch + 1, transaction_version=2) == E.NONE
    assert _marker(raw, 2, pid, epoch + 1, transaction_version=2) == E.INVALID_PRODUCER_EPOCH
