"""The transaction APIs' error codes over the wire, each as Kafka 4's broker answers it.

Sources: core/src/main/scala/kafka/coordinator/transaction/TransactionCoordinator.scala
(handleInitProducerId, prepareInitProducerIdTransit, handleAddPartitionsToTransaction,
handleVerifyPartitionsInTransaction, endTransaction), core/src/main/scala/kafka/server/KafkaApis.scala
(the PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH mapping for old versions, handleAddPartitionsToTxnRequest's
UNKNOWN_TOPIC_OR_PARTITION / OPERATION_NOT_ATTEMPTED), ReplicaManager.appendRecords' verification
(INVALID_TXN_STATE for a partition not in the transaction), group-coordinator's OffsetMetadataManager
(validateTransactionalOffsetCommit, fetchOffsets' UNSTABLE_OFFSET_COMMIT).
"""
from __future__ import annotations

import time

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.transactions.txnwire import (
    add_offsets,
    add_partitions,
    end_txn,
    init_pid,
    init_until_ready,
    produce_txn,
    txn_commit,
)
from tests.support.raw_kafka import RawKafka


@pytest.fixture(scope="module")
def raw(kcoord_shared_server):
    from confluent_kafka.admin import AdminClient, NewTopic
    with AdminClient({"bootstrap.servers": kcoord_shared_server.bootstrap}) as admin:  # not kept for the module
        for f in admin.create_topics([NewTopic("wire", 2)]).values():
            f.result(30)
    with RawKafka(kcoord_shared_server.port) as r:
        init_until_ready(r, "warm-up")  # the coordinator has loaded its partitions
        yield r


def test_find_coordinator_for_a_transactional_id(raw, kcoord_shared_server):
    """FindCoordinator key type 1: this node (KafkaApis.handleFindCoordinatorRequest)."""
    resp = raw.request(10, 4, m.FindCoordinatorRequest(key_type=1, coordinator_keys=["any-txn"]))
    c = resp.coordinators[0]
    assert (c.error_code, c.port) == (E.NONE, kcoord_shared_server.port)


def test_init_producer_id_bumps_the_epoch_and_checks_its_input(raw):
    """handleInitProducerId: "" is INVALID_REQUEST, a timeout above transaction.max.timeout.ms
    INVALID_TRANSACTION_TIMEOUT; each InitProducerId of a complete transaction bumps the epoch, same id."""
    assert init_pid(raw, "")[0] == E.INVALID_REQUEST
    assert init_pid(raw, "t-init", timeout_ms=900001)[0] == E.INVALID_TRANSACTION_TIMEOUT
    error, pid, epoch = init_pid(raw, "t-init")
    assert (error, epoch) == (E.NONE, 0)
    assert init_pid(raw, "t-init") == (E.NONE, pid, 1)


def test_kip360_expected_epoch(raw):
    """prepareIncrementProducerEpoch (KIP-360, v3+): the current epoch bumps, the last one is a retry that
    keeps it, anything else PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4, as KafkaApis maps it); a
    producer id without an epoch is INVALID_REQUEST (KafkaApis.handleInitProducerIdRequest)."""
    _, pid, _ = init_pid(raw, "t-360")
    assert init_pid(raw, "t-360", version=3, producer_id=pid, epoch=0) == (E.NONE, pid, 1)
    assert init_pid(raw, "t-360", version=3, producer_id=pid, epoch=0) == (E.NONE, pid, 1)  # retry
    assert init_pid(raw, "t-360", version=4, producer_id=pid, epoch=7)[0] == E.PRODUCER_FENCED
    assert init_pid(raw, "t-360", version=3, producer_id=pid, epoch=7)[0] == E.INVALID_PRODUCER_EPOCH
    assert init_pid(raw, "t-360", version=4, producer_id=pid + 1000, epoch=1)[0] == E.PRODUCER_FENCED
    assert init_pid(raw, "t-360", version=4, producer_id=pid, epoch=-1)[0] == E.INVALID_REQUEST


def test_add_partitions_errors(raw):
    """handleAddPartitionsToTransaction: unknown id or producer id INVALID_PRODUCER_ID_MAPPING, another epoch
    PRODUCER_FENCED (v2+) / INVALID_PRODUCER_EPOCH (v0-1); an unknown partition fails the request
    (UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED)."""
    assert add_partitions(raw, "t-nobody", 1, 0, [("wire", 0)]) == {("wire", 0): E.INVALID_PRODUCER_ID_MAPPING}
    _, pid, epoch = init_pid(raw, "t-add")
    assert add_partitions(raw, "t-add", pid + 1, epoch, [("wire", 0)]) == {("wire", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions(raw, "t-add", pid, epoch - 1, [("wire", 0)]) == {("wire", 0): E.PRODUCER_FENCED}
    assert add_partitions(raw, "t-add", pid, epoch - 1, [("wire", 0)], version=1) == {
        ("wire", 0): E.INVALID_PRODUCER_EPOCH}
    assert add_partitions(raw, "t-add", pid, epoch, [("wire", 0), ("nope", 0)]) == {
        ("wire", 0): E.OPERATION_NOT_ATTEMPTED, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert add_partitions(raw, "t-add", pid, epoch, [("wire", 0), ("wire", 1)]) == {
        ("wire", 0): E.NONE, ("wire", 1): E.NONE}
    assert end_txn(raw, "t-add", pid, epoch, False) == E.NONE


def test_add_partitions_v4_batched_and_verify_only(raw):
    """v4+: several transactions per request; verify_only answers whether each partition is in the ongoing
    transaction (handleVerifyPartitionsInTransaction: TRANSACTION_ABORTABLE when not), adding nothing."""
    _, pid, epoch = init_pid(raw, "t-v4")
    assert add_partitions(raw, "t-v4", pid, epoch, [("wire", 0)]) == {("wire", 0): E.NONE}
    Rq = m.AddPartitionsToTxnRequest
    topic = Rq.AddPartitionsToTxnTopic(name="wire", partitions=[0, 1])
    resp = raw.request(24, 5, Rq(transactions=[
        Rq.AddPartitionsToTxnTransaction(transactional_id="t-v4", producer_id=pid, producer_epoch=epoch,
                                         verify_only=True, topics=[topic]),
        Rq.AddPartitionsToTxnTransaction(transactional_id="t-nobody-v4", producer_id=pid, producer_epoch=epoch,
                                         verify_only=True, topics=[topic])]))
    got = {(r.transactional_id, p.partition_index): p.partition_error_code
           for r in resp.results_by_transaction for t in r.topic_results for p in t.results_by_partition}
    assert resp.error_code == E.NONE
    assert got == {("t-v4", 0): E.NONE, ("t-v4", 1): E.TRANSACTION_ABORTABLE,
                   ("t-nobody-v4", 0): E.INVALID_PRODUCER_ID_MAPPING, ("t-nobody-v4", 1): E.INVALID_PRODUCER_ID_MAPPING}
    assert end_txn(raw, "t-v4", pid, epoch, True) == E.NONE


def test_end_txn_state_errors(raw):
    """endTransaction: nothing ongoing (Empty) INVALID_TXN_STATE; a retried commit of a completed commit NONE;
    aborting it INVALID_TXN_STATE; another epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2)."""
    _, pid, epoch = init_pid(raw, "t-end")
    assert end_txn(raw, "t-end", pid, epoch, True) == E.INVALID_TXN_STATE
    assert add_partitions(raw, "t-end", pid, epoch, [("wire", 1)]) == {("wire", 1): E.NONE}
    assert end_txn(raw, "t-end", pid, epoch + 1, True) == E.PRODUCER_FENCED
    assert end_txn(raw, "t-end", pid, epoch + 1, True, version=1) == E.INVALID_PRODUCER_EPOCH
    assert end_txn(raw, "t-end", pid, epoch, True) == E.NONE
    deadline = time.monotonic() + 10
    while (error := end_txn(raw, "t-end", pid, epoch, True)) == E.CONCURRENT_TRANSACTIONS:
        assert time.monotonic() < deadline  # PrepareCommit until the markers are written
        time.sleep(0.02)
    assert error == E.NONE
    assert end_txn(raw, "t-end", pid, epoch, False) == E.INVALID_TXN_STATE


def test_transactional_produce_needs_the_partition_in_the_transaction(raw):
    """ReplicaManager.appendRecords' verification: a partition not added answers INVALID_TXN_STATE; an older
    epoch INVALID_PRODUCER_EPOCH (the coordinator's PRODUCER_FENCED, as produce maps it)."""
    _, pid, epoch = init_pid(raw, "t-produce")
    assert produce_txn(raw, "t-produce", pid, epoch, "wire", 0, [b"x"]) == E.INVALID_TXN_STATE
    assert add_partitions(raw, "t-produce", pid, epoch, [("wire", 0)]) == {("wire", 0): E.NONE}
    assert produce_txn(raw, "t-produce", pid, epoch, "wire", 0, [b"x"]) == E.NONE
    _, _, newer = init_until_ready(raw, "t-produce")  # fences the first producer, aborting its transaction
    assert newer == epoch + 2
    assert produce_txn(raw, "t-produce", pid, epoch, "wire", 0, [b"y"], sequence=1) == E.INVALID_PRODUCER_EPOCH


def test_init_producer_id_fences_an_ongoing_transaction(raw):
    """prepareInitProducerIdTransit, Ongoing: the transaction is aborted with epoch + 1 and the caller told
    CONCURRENT_TRANSACTIONS; its retry gets epoch + 2; the old producer is PRODUCER_FENCED."""
    _, pid, epoch = init_pid(raw, "t-fence")
    assert add_partitions(raw, "t-fence", pid, epoch, [("wire", 1)]) == {("wire", 1): E.NONE}
    assert init_pid(raw, "t-fence")[0] == E.CONCURRENT_TRANSACTIONS
    assert init_until_ready(raw, "t-fence") == (E.NONE, pid, epoch + 2)
    assert end_txn(raw, "t-fence", pid, epoch, True) == E.PRODUCER_FENCED
    assert add_partitions(raw, "t-fence", pid, epoch, [("wire", 0)]) == {("wire", 0): E.PRODUCER_FENCED}


def test_txn_offset_commit_pending_until_the_marker(raw):
    """TxnOffsetCommit needs the group's offsets partition in the transaction (AddOffsetsToTxn; else
    INVALID_TXN_STATE); a generation for a group that does not exist is ILLEGAL_GENERATION
    (validateTransactionalOffsetCommit); while pending, OffsetFetch require_stable answers
    UNSTABLE_OFFSET_COMMIT (fetchOffsets); the commit marker makes the offset committed."""
    group = "wire-txn-group"
    _, pid, epoch = init_pid(raw, "t-offsets")
    assert txn_commit(raw, "t-offsets", pid, epoch, group, {("wire", 0): 5, ("nope", 0): 1}) == {
        ("wire", 0): E.INVALID_TXN_STATE, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert add_offsets(raw, "t-offsets", pid, epoch, group) == E.NONE
    assert txn_commit(raw, "t-offsets", pid, epoch, group, {("wire", 0): 5}, generation=3, member="m") == {
        ("wire", 0): E.ILLEGAL_GENERATION}
    assert txn_commit(raw, "t-offsets", pid, epoch, group, {("wire", 0): 5, ("nope", 0): 1}) == {
        ("wire", 0): E.NONE, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}

    def fetch(stable):
        Rq = m.OffsetFetchRequest
        resp = raw.request(9, 7, Rq(group_id=group, require_stable=stable, topics=[
            Rq.OffsetFetchRequestTopic(name="wire", partition_indexes=[0])]))
        p = resp.topics[0].partitions[0]
        return p.error_code, p.committed_offset

    assert fetch(True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert fetch(False) == (E.NONE, -1)
    assert end_txn(raw, "t-offsets", pid, epoch, True) == E.NONE
    deadline = time.monotonic() + 10
    while fetch(True) != (E.NONE, 5):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _consumer_member(raw, group: str, member_id: str, topic: str = "wire") -> int:
    """A KIP-848 member joins `group` (ConsumerGroupHeartbeat v0, epoch 0); returns its member epoch."""
    resp = raw.request(68, 0, m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=60000, subscribed_topic_names=[topic], server_assignor=None, topic_partitions=[]))
    assert resp.error_code == E.NONE, resp
    return resp.member_epoch


def test_txn_offset_commit_from_consumer_protocol_members(raw):
    """A consume-transform-produce loop whose consumer uses group.protocol=consumer sends its member id and
    member epoch (as the generation) in TxnOffsetCommit. OffsetMetadataManager.validateTransactionalOffsetCommit
    validates them with ConsumerGroup.validateOffsetCommit(isTransactional=true): any TxnOffsetCommit
    version (the v9 rule is OffsetCommit's), UNKNOWN_MEMBER_ID for a member the group does not have (epoch -1
    and no member id included, while the group has members), and an epoch other than the member's
    ILLEGAL_GENERATION -- validateMemberEpoch's STALE_MEMBER_EPOCH is not TxnOffsetCommit's, so it is
    converted. Issue #24: every such commit used to be refused with ILLEGAL_GENERATION."""
    group, txn = "wire-kip848-txn", "t-kip848"
    epoch_a = _consumer_member(raw, group, "kip848-member-a")
    _, pid, pepoch = init_pid(raw, txn)
    assert add_offsets(raw, txn, pid, pepoch, group) == E.NONE
    offsets = {("wire", 0): 7}
    for version in (3, 4):
        assert txn_commit(raw, txn, pid, pepoch, group, offsets, version=version, generation=epoch_a,
                          member="kip848-member-a") == {("wire", 0): E.NONE}
    assert txn_commit(raw, txn, pid, pepoch, group, offsets, generation=epoch_a + 1,
                      member="kip848-member-a") == {("wire", 0): E.ILLEGAL_GENERATION}
    assert txn_commit(raw, txn, pid, pepoch, group, offsets, generation=epoch_a - 1,
                      member="kip848-member-a") == {("wire", 0): E.ILLEGAL_GENERATION}
    assert txn_commit(raw, txn, pid, pepoch, group, offsets, generation=epoch_a,
                      member="kip848-nobody") == {("wire", 0): E.UNKNOWN_MEMBER_ID}
    # v0-2 carry no member: with members in the group, "" is not one of them.
    assert txn_commit(raw, txn, pid, pepoch, group, offsets, version=2) == {("wire", 0): E.UNKNOWN_MEMBER_ID}
    assert end_txn(raw, txn, pid, pepoch, True) == E.NONE


def test_describe_and_list_transactions(raw):
    """handleDescribeTransactions: state, producer, timeout, partitions; an unknown id
    TRANSACTIONAL_ID_NOT_FOUND. listTransactionStates: state and producer id filters, unknown state names
    listed back, the duration filter (v1) keeps transactions older than it, the transactional id pattern (v2,
    KIP-1152; ListTransactionsResponse.json: "This API can return InvalidRegularExpression")."""
    _, pid, epoch = init_pid(raw, "t-admin", timeout_ms=45000)
    assert add_partitions(raw, "t-admin", pid, epoch, [("wire", 0), ("wire", 1)]) == {
        ("wire", 0): E.NONE, ("wire", 1): E.NONE}
    resp = raw.request(65, 0, m.DescribeTransactionsRequest(transactional_ids=["t-admin", "t-unknown"]))
    described, unknown = resp.transaction_states
    assert (described.error_code, described.transaction_state, described.producer_id, described.producer_epoch,
            described.transaction_timeout_ms) == (E.NONE, "Ongoing", pid, epoch, 45000)
    assert [(t.topic, sorted(t.partitions)) for t in described.topics] == [("wire", [0, 1])]
    assert described.transaction_start_time_ms > 0
    assert unknown.error_code == E.TRANSACTIONAL_ID_NOT_FOUND

    def listed(version=1, states=(), pids=(), duration=-1, pattern=None, error=E.NONE):
        resp = raw.request(66, version, m.ListTransactionsRequest(
            state_filters=list(states), producer_id_filters=list(pids), duration_filter=duration,
            transactional_id_pattern=pattern))
        assert resp.error_code == error
        return {t.transactional_id: (t.producer_id, t.transaction_state) for t in resp.transaction_states}, \
            resp.unknown_state_filters

    ongoing, unknown_states = listed(states=["Ongoing", "Bogus"])
    assert ongoing.get("t-admin") == (pid, "Ongoing") and unknown_states == ["Bogus"]
    assert set(listed(pids=[pid])[0]) == {"t-admin"}
    assert "t-admin" not in listed(duration=3_600_000)[0]
    time.sleep(0.05)
    assert "t-admin" in listed(duration=10)[0]
    assert "t-admin" in listed(version=0)[0]
    # v2 (KIP-1152): the whole id matches the pattern; "" or null lists all; a bad pattern is refused
    assert "t-admin" in listed(version=2, pattern="t-ad.*")[0]
    assert "t-admin" not in listed(version=2, pattern="t-ad")[0]
    assert "t-admin" in listed(version=2, pattern="")[0]
    assert listed(version=2, pattern="t-(", error=E.INVALID_REGULAR_EXPRESSION)[0] == {}
    assert end_txn(raw, "t-admin", pid, epoch, False) == E.NONE


def test_describe_producers(raw):
    """DescribeProducers: the partition's producers with their epoch, last sequence and the first offset of
    their open transaction; an unknown partition UNKNOWN_TOPIC_OR_PARTITION."""
    _, pid, epoch = init_pid(raw, "t-producers")
    assert add_partitions(raw, "t-producers", pid, epoch, [("wire", 1)]) == {("wire", 1): E.NONE}
    assert produce_txn(raw, "t-producers", pid, epoch, "wire", 1, [b"a", b"b"]) == E.NONE
    Rq = m.DescribeProducersRequest
    resp = raw.request(61, 0, Rq(topics=[Rq.TopicRequest(name="wire", partition_indexes=[1, 9])]))
    known, missing = resp.topics[0].partitions
    mine = [p for p in known.active_producers if p.producer_id == pid]
    assert [(p.producer_epoch, p.last_sequence) for p in mine] == [(epoch, 1)]
    assert mine[0].current_txn_start_offset >= 0
    assert missing.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert end_txn(raw, "t-producers", pid, epoch, True) == E.NONE


def _write_marker(raw, pid, epoch, commit, partitions, coordinator_epoch=0):
    Rq = m.WriteTxnMarkersRequest
    topics = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    resp = raw.request(27, 1, Rq(markers=[Rq.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
        topics=[Rq.WritableTxnMarker.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()])]))
    return {(t.name, p.partition_index): p.error_code for t in resp.markers[0].topics for p in t.partitions}


def _latest(raw, isolation: int) -> int:
    Rq = m.ListOffsetsRequest
    resp = raw.request(2, 7, Rq(replica_id=-1, isolation_level=isolation, topics=[Rq.ListOffsetsTopic(
        name="wire", partitions=[Rq.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1,
                                                                          current_leader_epoch=-1)])]))
    return resp.topics[0].partitions[0].offset


def test_write_txn_markers_aborts_a_hanging_transaction(raw):
    """handleWriteTxnMarkersRequest, as kafka-transactions.sh abort uses it (KIP-664): an ABORT marker ends
    the partition's open transaction, so the last stable offset (ListOffsets read_committed) reaches the
    end again; a marker of an epoch older than the producer's there is INVALID_PRODUCER_EPOCH; a partition
    we do not have UNKNOWN_TOPIC_OR_PARTITION."""
    _, pid, epoch = init_pid(raw, "t-hanging")
    assert add_partitions(raw, "t-hanging", pid, epoch, [("wire", 0)]) == {("wire", 0): E.NONE}
    assert produce_txn(raw, "t-hanging", pid, epoch, "wire", 0, [b"h"]) == E.NONE
    assert _latest(raw, 1) < _latest(raw, 0)  # the open transaction holds read_committed back
    assert _write_marker(raw, pid, epoch - 1, False, [("wire", 0), ("nope", 0)]) == {
        ("wire", 0): E.INVALID_PRODUCER_EPOCH, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert _write_marker(raw, pid, epoch, False, [("wire", 0)]) == {("wire", 0): E.NONE}
    assert _latest(raw, 1) == _latest(raw, 0)
    assert end_txn(raw, "t-hanging", pid, epoch, False) == E.NONE  # the coordinator's side, cleaned up


def test_write_txn_markers_to_consumer_offsets_refuses_an_older_coordinator_epoch(raw):
    """A marker into `__consumer_offsets` goes to the group coordinator with its coordinator epoch
    (KafkaApis.handleWriteTxnMarkersRequest -> GroupCoordinatorService.completeTransaction ->
    CoordinatorRuntime.scheduleTransactionCompletion, which appends the marker with it; the log's
    ProducerAppendInfo.checkCoordinatorEpoch refuses an older one): TRANSACTION_COORDINATOR_FENCED for the
    older epoch, the same epoch again passes. A producer id no transactional id uses, so the broker's own
    transaction coordinator never writes for it."""
    pid, offsets = 2**40 + 17, ("__consumer_offsets", 0)
    assert _write_marker(raw, pid, 0, False, [offsets], coordinator_epoch=1000) == {offsets: E.NONE}
    assert _write_marker(raw, pid, 0, True, [offsets], coordinator_epoch=999) == {
        offsets: E.TRANSACTION_COORDINATOR_FENCED}
    assert _write_marker(raw, pid, 0, True, [offsets], coordinator_epoch=1000) == {offsets: E.NONE}
