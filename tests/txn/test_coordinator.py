"""The transaction coordinator without I/O: records out, replay in, the loader's replay equal to the live
state, failed appends changing nothing, prepared transactions completed after a load, timeouts
(TransactionCoordinator.scala / TransactionStateManager.scala / TransactionMetadata.scala)."""
from __future__ import annotations

import asyncio

from kcoord.coordinator.testing import ManualClock
from kcoord.protocol.errors import ErrorCode as E
from kcoord.txn.coordinator import TransactionCoordinator
from kcoord.txn.log_format import TransactionLogValue, decode_value, encode_key, encode_value
from kcoord.txn.metadata import TxnState as S
from kcoord.txn.state_manager import TransactionStateManager, TxnConfig


class Harness:
    def __init__(self) -> None:
        self.config = TxnConfig(num_partitions=3, max_timeout_ms=60000)
        self.state = TransactionStateManager(self.config)
        for p in range(3):
            self.state.complete_load(p, {})
        self.log: dict[int, list] = {p: [] for p in range(3)}
        self.fail_next = None
        self.failing = False  # every append fails while set
        self.markers: list = []
        self.spawned: list = []
        self.clock = ManualClock(1_000_000)
        self.next_pid = 100
        self.coordinator = TransactionCoordinator(
            self.state, append=self.append, write_markers=self.write_markers, allocate_producer_id=self.allocate,
            clock=self.clock, spawn=lambda coro, key=None: self.spawned.append(coro), sleep=self.sleep)

    def allocate(self) -> int:
        self.next_pid += 1
        return self.next_pid

    async def append(self, partition, key, value):
        if self.failing:
            return E.NOT_COORDINATOR
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            return error
        self.log[partition].append((key, value))
        return E.NONE

    async def write_markers(self, pid, epoch, commit, partitions, coordinator_epoch=0, transaction_version=0):
        self.markers.append((pid, epoch, commit, sorted(partitions)))

    async def sleep(self, _s):
        return None

    def run(self, coro):
        return asyncio.run(coro)

    def drain(self):
        while self.spawned:
            asyncio.run(self.spawned.pop(0))

    def reloaded(self) -> TransactionStateManager:
        fresh = TransactionStateManager(self.config)
        for p, records in self.log.items():
            fresh.complete_load(p, fresh.load(p, records))
        return fresh


def snapshot(state: TransactionStateManager) -> dict:
    return {md.transactional_id: (md.producer_id, md.producer_epoch, md.state, frozenset(md.partitions),
                                  md.timeout_ms) for md in state.all()}


def test_log_value_round_trip():
    v = TransactionLogValue(7, 3, 60000, int(S.ONGOING), (("a", 0), ("a", 2), ("b", 1)), 5, 4)
    assert decode_value(encode_value(v)) == v
    empty = TransactionLogValue(7, 3, 60000, int(S.EMPTY), None, 5, -1)
    assert decode_value(encode_value(empty)) == empty
    assert encode_key("t") == b"\x00\x00\x00\x01t"


def test_a_load_replays_to_the_live_state():
    h = Harness()
    error, pid, epoch = h.run(h.coordinator.handle_init_producer_id("t1", 30000, None))
    assert (error, epoch) == (E.NONE, 0)
    assert h.run(h.coordinator.handle_add_partitions("t1", pid, 0, [("x", 0), ("x", 1)])) == E.NONE
    assert h.run(h.coordinator.handle_end_transaction("t1", pid, 0, True)) == E.NONE
    h.drain()
    assert h.markers == [(pid, 0, True, [("x", 0), ("x", 1)])]
    assert h.run(h.coordinator.handle_init_producer_id("t2", 30000, None))[0] == E.NONE
    md = h.state.get_state("t1")
    assert (md.state, md.partitions) == (S.COMPLETE_COMMIT, set())
    assert snapshot(h.reloaded()) == snapshot(h.state)


def test_a_failed_append_changes_nothing():
    h = Harness()
    _, pid, _ = h.run(h.coordinator.handle_init_producer_id("t1", 30000, None))
    before = snapshot(h.state)
    h.fail_next = E.NOT_COORDINATOR
    assert h.run(h.coordinator.handle_add_partitions("t1", pid, 0, [("x", 0)])) == E.NOT_COORDINATOR
    assert snapshot(h.state) == before and not h.state.get_state("t1").pending
    assert h.run(h.coordinator.handle_add_partitions("t1", pid, 0, [("x", 0)])) == E.NONE


def test_prepared_transactions_complete_after_a_load():
    """A crash between PrepareCommit and the markers: the load finds PrepareCommit and finishes it."""
    h = Harness()
    _, pid, _ = h.run(h.coordinator.handle_init_producer_id("t1", 30000, None))
    h.run(h.coordinator.handle_add_partitions("t1", pid, 0, [("x", 0)]))
    h.run(h.coordinator.handle_end_transaction("t1", pid, 0, True))
    for coro in h.spawned:  # the crash: markers never written, no CompleteCommit
        coro.close()
    h.spawned.clear()
    h.markers.clear()
    h.state = h.reloaded()
    h.coordinator.state = h.state
    assert h.state.get_state("t1").state == S.PREPARE_COMMIT
    assert h.run(h.coordinator.handle_init_producer_id("t1", 30000, None))[0] == E.CONCURRENT_TRANSACTIONS
    h.coordinator.on_loaded(h.state.partition_for("t1"))
    h.drain()
    assert h.markers == [(pid, 0, True, [("x", 0)])]
    assert h.state.get_state("t1").state == S.COMPLETE_COMMIT


def test_timed_out_transaction_is_aborted_with_a_fencing_epoch():
    h = Harness()
    _, pid, _ = h.run(h.coordinator.handle_init_producer_id("t1", 1000, None))
    h.run(h.coordinator.handle_add_partitions("t1", pid, 0, [("x", 0)]))
    h.clock.sleep(999)
    assert h.run(h.coordinator.abort_timed_out_transactions()) == 0
    h.clock.sleep(2)
    assert h.run(h.coordinator.abort_timed_out_transactions()) == 1
    h.drain()
    assert h.markers == [(pid, 1, False, [("x", 0)])]
    md = h.state.get_state("t1")
    assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, 1)
    assert h.run(h.coordinator.handle_end_transaction("t1", pid, 0, True)) == E.PRODUCER_FENCED
    assert h.run(h.coordinator.handle_init_producer_id("t1", 1000, (pid, 0)))[0] == E.PRODUCER_FENCED
    assert h.run(h.coordinator.handle_init_producer_id("t1", 1000, None)) == (E.NONE, pid, 2)


def test_exhausted_epoch_rotates_the_producer_id():
    """prepareProducerIdRotation: at epoch 32766 the next InitProducerId gets a new id at epoch 0."""
    h = Harness()
    _, pid, _ = h.run(h.coordinator.handle_init_producer_id("t1", 1000, None))
    h.state.get_state("t1").producer_epoch = 32766
    error, new_pid, epoch = h.run(h.coordinator.handle_init_producer_id("t1", 1000, None))
    assert (error, epoch) == (E.NONE, 0) and new_pid != pid


def test_loading_and_not_owned():
    h = Harness()
    h.state.begin_load(h.state.partition_for("t1"))
    assert h.run(h.coordinator.handle_init_producer_id("t1", 1000, None))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    h.state.unload(h.state.partition_for("t1"))
    assert h.run(h.coordinator.handle_init_producer_id("t1", 1000, None))[0] == E.NOT_COORDINATOR


def test_idle_transactional_ids_expire():
    """removeExpiredTransactionalIds: an id idle for transactional.id.expiration.ms gets a tombstone; an
    ongoing one stays; a reload no longer knows the removed one."""
    h = Harness()
    h.state.config = TxnConfig(num_partitions=3, max_timeout_ms=60000, id_expiration_ms=1000)
    h.run(h.coordinator.handle_init_producer_id("idle", 30000, None))
    _, pid, _ = h.run(h.coordinator.handle_init_producer_id("busy", 30000, None))
    h.run(h.coordinator.handle_add_partitions("busy", pid, 0, [("x", 0)]))
    h.clock.sleep(1000)
    assert h.run(h.coordinator.remove_expired_transactional_ids()) == 1
    assert h.state.get_state("idle") is None and h.state.get_state("busy") is not None
    assert snapshot(h.reloaded()) == snapshot(h.state)


def test_no_producer_id_to_give_answers_the_allocators_error_and_writes_nothing():
    """RPCProducerIdManager without a block (a cluster node before its first claim) fails the allocation:
    TransactionCoordinator.handleInitProducerId answers that error (COORDINATOR_LOAD_IN_PROGRESS, retried by
    clients) and no metadata is created."""
    h = Harness()
    h.coordinator._allocate = lambda: E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.run(h.coordinator.handle_init_producer_id("t", 60000, None)) == (E.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    assert h.state.get_state("t") is None and h.log == {p: [] for p in range(3)}
