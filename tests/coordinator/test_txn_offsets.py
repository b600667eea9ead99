"""Transactional offsets in the group coordinator (Kafka's OffsetMetadataManager.commitTransactionalOffset,
replay with a producer id, replayEndTransactionMarker, validateTransactionalOffsetCommit; the loader's
handling of transactional batches and markers): pending until the marker, applied on COMMIT, dropped on
ABORT, UNSTABLE_OFFSET_COMMIT for require_stable meanwhile, the same after a load from the log."""
from __future__ import annotations

from kcoord.coordinator import checkpoint_store
from kcoord.coordinator.results import OffsetCommit, OffsetCommitRequestPartition
from kcoord.coordinator.service import GroupCoordinatorService
from kcoord.coordinator.testing import Capture, CoordinatorContext, ManualClock, RecordingWriter
from kcoord.coordinator.txn_offsets import TxnMarkerRecords, TxnOffsetCommitRecords
from kcoord.protocol.consumer_offsets import OffsetCommitValue
from kcoord.protocol.errors import ErrorCode as E
from kcoord.storage import LogConfig, PartitionLog

TP = ("t", 0)


def txn_commit(ctx, group, offset, pid=1, epoch=0, generation=-1, member="") -> dict:
    cap = Capture()
    ctx.gc.txn_commit_offsets(OffsetCommit(group, member, None, generation,
                                           [OffsetCommitRequestPartition("t", 0, offset)], -1, 3), pid, epoch, cap)
    return cap.result


def marker(ctx, group, pid, commit, epoch=0) -> E:
    cap = Capture()
    ctx.gc.complete_transaction(ctx.gc.partition_for(group), pid, epoch, 0, commit, cap)
    return cap.result


def fetch(ctx, group, stable=True):
    p = ctx.fetch_offsets(group, [TP], require_stable=stable).partitions[0]
    return p.error, p.offset


def test_pending_until_commit_dropped_on_abort():
    ctx = CoordinatorContext()
    assert txn_commit(ctx, "g", 5, pid=1) == {TP: E.NONE}
    assert fetch(ctx, "g") == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert fetch(ctx, "g", stable=False) == (E.NONE, -1)
    assert marker(ctx, "g", 1, True) == E.NONE
    assert fetch(ctx, "g") == (E.NONE, 5)
    assert txn_commit(ctx, "g", 9, pid=2) == {TP: E.NONE}
    assert marker(ctx, "g", 2, False) == E.NONE
    assert fetch(ctx, "g") == (E.NONE, 5)


def test_kip447_member_and_generation_checks():
    ctx = CoordinatorContext(group_initial_rebalance_delay_ms=0)
    assert txn_commit(ctx, "none", 1, generation=1, member="m") == {TP: E.ILLEGAL_GENERATION}
    leader = ctx.stable_group("g")[0]
    generation = ctx.group("g").generation_id
    assert txn_commit(ctx, "g", 1, generation=generation + 1, member=leader) == {TP: E.ILLEGAL_GENERATION}
    assert txn_commit(ctx, "g", 1, generation=generation, member="someone") == {TP: E.UNKNOWN_MEMBER_ID}
    assert txn_commit(ctx, "g", 1, generation=generation, member=leader) == {TP: E.NONE}
    assert txn_commit(ctx, "g", 2) == {TP: E.NONE}  # v0-2 name no member: any group state


def test_a_failed_write_leaves_nothing_pending():
    ctx = CoordinatorContext()
    ctx.writer.auto_error = E.KAFKA_STORAGE_ERROR
    assert txn_commit(ctx, "g", 5) == {TP: E.NOT_COORDINATOR}
    ctx.writer.auto_error = E.NONE
    assert fetch(ctx, "g") == (E.NONE, -1)


def test_deleting_a_group_drops_its_pending_offsets():
    ctx = CoordinatorContext()
    assert txn_commit(ctx, "g", 5, pid=4) == {TP: E.NONE}
    cap = Capture()
    ctx.gc.commit_offsets(OffsetCommit("g", "", None, -1, [OffsetCommitRequestPartition("t", 1, 1)], -1, 9), cap)
    cap = Capture()
    ctx.delete_groups(["g"], cap)
    assert cap.result == {"g": E.NONE}
    assert marker(ctx, "g", 4, True) == E.NONE  # the commit comes too late: nothing left to apply
    assert fetch(ctx, "g") == (E.NONE, -1)


def _value(offset: int) -> OffsetCommitValue:
    return OffsetCommitValue(offset, "", 1, -1, -1, None)


def test_load_applies_committed_drops_aborted_keeps_open_pending(tmp_path):
    """The loader holds transactional batches until their producer's marker (checkpoint_store._read); an
    open transaction is pending after the load, and the load's end offset stops before it, so a
    checkpoint never covers it."""
    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"), "__consumer_offsets", 0, LogConfig())
    log.append(bytearray(TxnOffsetCommitRecords("g", {("t", 0): _value(10)}, 1, 0).to_batch()))
    log.append(bytearray(TxnOffsetCommitRecords("g", {("t", 1): _value(20)}, 2, 0).to_batch()))
    log.append(bytearray(TxnMarkerRecords(2, 0, False).to_batch()))
    log.append(bytearray(TxnMarkerRecords(1, 0, True).to_batch()))
    open_at = log.append(bytearray(TxnOffsetCommitRecords("g", {("t", 2): _value(30)}, 3, 0).to_batch())).base_offset
    service = GroupCoordinatorService(clock=ManualClock(), writer=RecordingWriter())

    def load_partition(partition, tail, state, keep):
        state.replay(tail, service.log)
        service.begin_load(partition).load(state, keep)
        service.complete_load(partition)

    loaded = checkpoint_store.load(log, 0, 0, load_partition, use_checkpoint=False)
    assert loaded.end == open_at
    shard = service.shards[0]
    assert {tp: v.offset for tp, v in shard.offset_manager.committed("g").items()} == {("t", 0): 10}
    assert shard.offset_manager.transactional.partitions("g") == {("t", 2)}
    cap = Capture()
    shard.complete_transaction(3, 0, 0, True, cap)
    assert cap.result == E.NONE
    assert {tp: v.offset for tp, v in shard.offset_manager.committed("g").items()} == {("t", 0): 10, ("t", 2): 30}


def test_a_marker_from_an_older_coordinator_epoch_is_refused_and_changes_nothing():
    """GroupCoordinatorService.completeTransaction / CoordinatorRuntime.completeTransaction append the marker
    with the transaction coordinator's epoch; the log's ProducerAppendInfo.checkCoordinatorEpoch refuses one
    older than the producer's last (TransactionCoordinatorFencedException). Equal epochs pass (a retry)."""
    ctx = CoordinatorContext()
    assert txn_commit(ctx, "g", 5, pid=1) == {TP: E.NONE}
    cap = Capture()
    ctx.gc.complete_transaction(ctx.gc.partition_for("g"), 1, 0, 7, False, cap)  # coordinator epoch 7 aborts
    assert cap.result == E.NONE
    assert txn_commit(ctx, "g", 6, pid=1) == {TP: E.NONE}
    appends_before = len(ctx.writer.appends)
    cap = Capture()
    ctx.gc.complete_transaction(ctx.gc.partition_for("g"), 1, 0, 6, True, cap)  # a zombie's commit
    assert cap.result == E.TRANSACTION_COORDINATOR_FENCED
    assert len(ctx.writer.appends) == appends_before  # nothing written
    assert fetch(ctx, "g") == (E.UNSTABLE_OFFSET_COMMIT, -1)  # still pending, not applied
    cap = Capture()
    ctx.gc.complete_transaction(ctx.gc.partition_for("g"), 1, 0, 7, True, cap)
    assert cap.result == E.NONE
    assert fetch(ctx, "g") == (E.NONE, 6)


def test_a_load_reads_the_coordinator_epochs_back_from_the_markers(tmp_path):
    """What a new group coordinator knows after a failover: the markers it reads while loading carry their
    coordinator epochs (EndTransactionMarker's value), so a zombie's marker is still refused."""
    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"), "__consumer_offsets", 0, LogConfig())
    log.append(bytearray(TxnOffsetCommitRecords("g", {("t", 0): _value(10)}, 1, 0).to_batch()))
    log.append(bytearray(TxnMarkerRecords(1, 0, True, 4).to_batch()))
    log.append(bytearray(TxnMarkerRecords(2, 0, False, 2).to_batch()))
    log.append(bytearray(TxnMarkerRecords(1, 0, False, 3).to_batch()))  # not a regression of the highest
    service = GroupCoordinatorService(clock=ManualClock(), writer=RecordingWriter())

    def load_partition(partition, tail, state, keep):
        state.replay(tail, service.log)
        service.begin_load(partition).load(state, keep)
        service.complete_load(partition)

    checkpoint_store.load(log, 0, 0, load_partition, use_checkpoint=False)
    shard = service.shards[0]
    assert shard.offset_manager.transactional.coordinator_epochs == {1: 4, 2: 2}
    results = []
    shard.complete_transaction(1, 0, 3, True, results.append)
    shard.complete_transaction(2, 0, 1, True, results.append)
    assert results == [E.TRANSACTION_COORDINATOR_FENCED, E.TRANSACTION_COORDINATOR_FENCED]
    shard.complete_transaction(2, 0, 2, True, results.append)
    assert results[2:] == [E.NONE]
