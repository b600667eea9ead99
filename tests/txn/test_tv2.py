"""Transaction version 2 (KIP-890 part 2) in the coordinator without I/O: the epoch bumped by every end,
retried ends recognised, the producer id rotated when the epoch runs out, the coordinator's own abort,
and `__transaction_state` value v1 carrying what a load needs.

Kafka sources followed: core/.../transaction/TransactionCoordinator.scala (endTransaction: isValidEpoch,
retryOnEpochBump / endTxnEpochBumped, retryOnOverflow, the nextProducerId allocation;
handleAddPartitionsToTransaction's pending check first, KAFKA-18660), TransactionMetadata.scala
(prepareAbortOrCommit, prepareComplete, completeTransitionTo), TransactionLog.scala and
TransactionLogValue.json (v1: PreviousProducerId tag 0, NextProducerId tag 1, ClientTransactionVersion
tag 2), KAFKA-19367 (the coordinator's fencing abort is not bumped twice).
"""
from __future__ import annotations

from kcoord.protocol.errors import ErrorCode as E
from kcoord.txn.log_format import TransactionLogValue, decode_value, encode_key, encode_value
from kcoord.txn.metadata import MAX_EPOCH, TV_2
from kcoord.txn.metadata import TxnState as S
from tests.txn.test_coordinator import Harness, snapshot

TP = [("x", 0), ("x", 1)]


def tv2_harness() -> Harness:
    h = Harness()
    h.coordinator.transaction_version = lambda: TV_2  # the finalized level: log values are v1
    return h


def full(state) -> dict:
    """snapshot plus what TV2 adds to the metadata."""
    return {md.transactional_id: (md.producer_id, md.producer_epoch, md.state, md.previous_producer_id,
                                  md.next_producer_id, md.client_version) for md in state.all()}


def begin(h: Harness, txn: str = "t") -> tuple[int, int]:
    error, pid, epoch = h.run(h.coordinator.handle_init_producer_id(txn, 30000, None))
    assert error == E.NONE
    assert h.run(h.coordinator.handle_add_partitions(txn, pid, epoch, TP, TV_2)) == E.NONE
    return pid, epoch


def test_log_value_v1_round_trips_its_tagged_fields_and_v0_still_reads():
    v = TransactionLogValue(7, 3, 60000, int(S.PREPARE_COMMIT), (("a", 0), ("b", 1)), 5, 4, 6, 9, 2)
    raw = encode_value(v, 1)
    assert raw[:2] == b"\x00\x01" and decode_value(raw) == v
    plain = TransactionLogValue(7, 3, 60000, int(S.EMPTY), None, 5, -1)
    assert decode_value(encode_value(plain, 1)) == plain
    assert encode_value(plain, 1).endswith(b"\x00")  # defaults are not written: no tagged field
    assert decode_value(encode_value(v, 0)) == v._replace(previous_producer_id=-1, next_producer_id=-1,
                                                          client_transaction_version=0)


def test_a_tv2_end_bumps_the_epoch_and_the_markers_carry_it():
    h = tv2_harness()
    pid, epoch = begin(h)
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, True, TV_2)) == (E.NONE, pid, epoch + 1)
    h.drain()
    assert h.markers == [(pid, epoch + 1, True, TP)]
    md = h.state.get_state("t")
    assert (md.state, md.producer_epoch, md.client_version) == (S.COMPLETE_COMMIT, epoch + 1, TV_2)
    # the retry of that EndTxn carries the epoch before the bump and gets the same answer
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, True, TV_2)) == (E.NONE, pid, epoch + 1)
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, False, TV_2))[0] == E.INVALID_TXN_STATE
    # the bumped epoch on a completed transaction is the next transaction's end, with nothing begun:
    # a commit of nothing is INVALID_TXN_STATE (the abort of nothing: the next test)
    assert h.run(h.coordinator.end_transaction("t", pid, epoch + 1, True, TV_2))[0] == E.INVALID_TXN_STATE
    assert h.run(h.coordinator.end_transaction("t", pid, epoch + 2, True, TV_2))[0] == E.PRODUCER_FENCED
    # the next transaction runs at the bumped epoch; the old one is fenced
    assert h.run(h.coordinator.handle_add_partitions("t", pid, epoch, TP, TV_2)) == E.PRODUCER_FENCED
    assert h.run(h.coordinator.handle_add_partitions("t", pid, epoch + 1, TP, TV_2)) == E.NONE
    assert h.run(h.coordinator.end_transaction("t", pid, epoch + 1, False, TV_2)) == (E.NONE, pid, epoch + 2)
    h.drain()
    assert h.markers[-1] == (pid, epoch + 2, False, TP)
    assert full(h.reloaded()) == full(h.state)


def test_a_tv2_abort_of_nothing_bumps_the_epoch_through_an_empty_prepare_abort():
    """KAFKA-14563's table for Empty / CompleteAbort / CompleteCommit: at the current epoch an abort bumps
    (PrepareAbort with no partitions: no marker to write), a commit is INVALID_TXN_STATE; at the epoch
    before a bump (a retry) the matching end answers NONE, the other INVALID_TXN_STATE, and on Empty an
    abort PRODUCER_FENCED."""
    h = tv2_harness()
    _, pid, epoch = h.run(h.coordinator.handle_init_producer_id("t", 30000, None))
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, True, TV_2))[0] == E.INVALID_TXN_STATE
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, False, TV_2)) == (E.NONE, pid, epoch + 1)
    assert h.state.get_state("t").state == S.PREPARE_ABORT
    h.drain()
    md = h.state.get_state("t")
    assert (md.state, md.producer_epoch, md.partitions, h.markers) == (S.COMPLETE_ABORT, epoch + 1, set(), [])
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, False, TV_2)) == (E.NONE, pid, epoch + 1)
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, True, TV_2))[0] == E.INVALID_TXN_STATE
    assert h.run(h.coordinator.end_transaction("t", pid, epoch + 1, False, TV_2)) == (E.NONE, pid, epoch + 2)
    h.drain()
    # InitProducerId leaves Empty at the next epoch: the one before it is a retry there, fenced
    assert h.run(h.coordinator.handle_init_producer_id("t", 30000, None)) == (E.NONE, pid, epoch + 3)
    assert h.run(h.coordinator.end_transaction("t", pid, epoch + 2, False, TV_2))[0] == E.PRODUCER_FENCED
    assert h.run(h.coordinator.end_transaction("t", pid, epoch + 2, True, TV_2))[0] == E.INVALID_TXN_STATE
    # a version-1 client keeps version 1's answers: Empty is INVALID_TXN_STATE either way
    assert h.run(h.coordinator.end_transaction("t", pid, epoch + 3, False, 0))[0] == E.INVALID_TXN_STATE
    assert full(h.reloaded()) == full(h.state)


def test_a_retry_while_prepared_is_concurrent_and_the_same_epoch_is_fenced():
    h = tv2_harness()
    pid, epoch = begin(h)
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, True, TV_2)) == (E.NONE, pid, epoch + 1)
    assert h.state.get_state("t").state == S.PREPARE_COMMIT  # markers not written yet
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, True, TV_2))[0] == E.CONCURRENT_TRANSACTIONS
    assert h.run(h.coordinator.end_transaction("t", pid, epoch + 1, True, TV_2))[0] == E.PRODUCER_FENCED
    assert h.run(h.coordinator.end_transaction("t", pid + 1, epoch, True, TV_2))[0] == E.INVALID_PRODUCER_ID_MAPPING
    h.drain()
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, True, TV_2)) == (E.NONE, pid, epoch + 1)


def test_a_v1_end_on_the_same_coordinator_keeps_the_epoch():
    h = tv2_harness()
    pid, epoch = begin(h)
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, True, 0)) == (E.NONE, pid, epoch)
    h.drain()
    assert h.markers == [(pid, epoch, True, TP)]
    assert h.run(h.coordinator.end_transaction("t", pid, epoch, True, 0)) == (E.NONE, pid, epoch)


def test_an_exhausted_epoch_moves_to_a_new_producer_id_when_the_transaction_completes():
    h = tv2_harness()
    pid, _ = begin(h)
    partition = h.state.partition_for("t")
    # a producer near the end of its epochs (as many transactions would leave it), replayed as a record
    last = TransactionLogValue(pid, MAX_EPOCH - 1, 30000, int(S.ONGOING), tuple(TP), 1, 1, -1, -1, TV_2)
    h.state.replay(partition, encode_key("t"), encode_value(last, 1))
    error, new_pid, new_epoch = h.run(h.coordinator.end_transaction("t", pid, MAX_EPOCH - 1, True, TV_2))
    assert (error, new_epoch) == (E.NONE, 0) and new_pid not in (pid, -1)
    md = h.state.get_state("t")
    assert (md.state, md.producer_id, md.producer_epoch, md.next_producer_id) == (
        S.PREPARE_COMMIT, pid, MAX_EPOCH, new_pid)
    # the new id's first transaction waits for the rotation instead of being refused (KAFKA-18660)
    assert h.run(h.coordinator.handle_add_partitions("t", new_pid, 0, TP, TV_2)) == E.CONCURRENT_TRANSACTIONS
    h.drain()
    assert h.markers == [(pid, MAX_EPOCH, True, TP)]  # the markers go out under the old id
    md = h.state.get_state("t")
    assert (md.state, md.producer_id, md.producer_epoch, md.previous_producer_id, md.next_producer_id) == (
        S.COMPLETE_COMMIT, new_pid, 0, pid, -1)
    # a retry with the old id at its last epoch is recognised (retryOnOverflow), also after a load
    assert h.run(h.coordinator.end_transaction("t", pid, MAX_EPOCH - 1, True, TV_2)) == (E.NONE, new_pid, 0)
    h.state = h.reloaded()
    h.coordinator.state = h.state
    assert h.run(h.coordinator.end_transaction("t", pid, MAX_EPOCH - 1, True, TV_2)) == (E.NONE, new_pid, 0)
    assert h.run(h.coordinator.end_transaction("t", pid, MAX_EPOCH - 2, True, TV_2))[0] == \
        E.INVALID_PRODUCER_ID_MAPPING
    assert h.run(h.coordinator.handle_add_partitions("t", new_pid, 0, TP, TV_2)) == E.NONE


def test_the_coordinators_abort_at_tv2_bumps_the_epoch_once():
    h = tv2_harness()
    _, pid, _ = h.run(h.coordinator.handle_init_producer_id("t", 1000, None))
    assert h.run(h.coordinator.handle_add_partitions("t", pid, 0, TP, TV_2)) == E.NONE
    h.clock.sleep(1001)
    assert h.run(h.coordinator.abort_timed_out_transactions()) == 1
    h.drain()
    assert h.markers == [(pid, 1, False, TP)]
    md = h.state.get_state("t")
    assert (md.state, md.producer_epoch, md.client_version) == (S.COMPLETE_ABORT, 1, TV_2)
    assert h.run(h.coordinator.handle_init_producer_id("t", 1000, None)) == (E.NONE, pid, 2)
    assert snapshot(h.reloaded()) == snapshot(h.state)


def test_a_fence_whose_write_failed_is_retried_at_the_same_bumped_epoch():
    """A retried fence writes epoch + 1 again (not + 2, as KAFKA-9666 wants, and not the producer's own epoch,
    which a TV2 marker may not carry: ProducerAppendInfo.checkProducerEpoch, KIP-1228)."""
    h = tv2_harness()
    _, pid, _ = h.run(h.coordinator.handle_init_producer_id("t", 1000, None))
    assert h.run(h.coordinator.handle_add_partitions("t", pid, 0, TP, TV_2)) == E.NONE
    h.clock.sleep(1001)
    h.fail_next = E.NOT_ENOUGH_REPLICAS
    assert h.run(h.coordinator.abort_timed_out_transactions()) == 0
    assert h.run(h.coordinator.abort_timed_out_transactions()) == 1
    h.drain()
    assert h.markers == [(pid, 1, False, TP)]
