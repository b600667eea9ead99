"""Records out, replay in, for the transaction coordinator: after any sequence of InitProducerId,
AddPartitionsToTxn, EndTxn, timeout aborts and id expiry -- some of whose appends fail -- a fresh
TransactionStateManager loading `__transaction_state` from the start holds what the live one holds
(producer id, epoch, state, partitions, timeout of every id), and a failed append changes nothing."""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.protocol.errors import ErrorCode as E
from kcoord.txn.state_manager import TxnConfig
from tests.txn.test_coordinator import Harness, snapshot

IDS = ["a", "b", "c"]
PARTITIONS = [("x", 0), ("x", 1), ("y", 0)]


class TxnReplayMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.h.state.config = TxnConfig(num_partitions=3, max_timeout_ms=60000, id_expiration_ms=50_000)
        self.producers: dict[str, tuple[int, int]] = {}

    def _run(self, coro, fail: bool):
        """Run a handler; with `fail`, every append it makes fails, and then nothing may change."""
        before = snapshot(self.h.state)
        logged = sum(len(v) for v in self.h.log.values())
        self.h.failing = fail
        try:
            result = self.h.run(coro)
        finally:
            self.h.failing = False
        if fail:
            assert snapshot(self.h.state) == before
            assert sum(len(v) for v in self.h.log.values()) == logged
            for coro in self.h.spawned:  # nothing prepared, so nothing to complete
                coro.close()
            self.h.spawned.clear()
        self.h.drain()
        return result

    @rule(txn=st.sampled_from(IDS), fail=st.booleans())
    def init(self, txn, fail):
        error, pid, epoch = self._run(self.h.coordinator.handle_init_producer_id(txn, 5_000, None), fail)
        if error == E.NONE:
            self.producers[txn] = (pid, epoch)

    @rule(txn=st.sampled_from(IDS), parts=st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=2),
          fail=st.booleans())
    def add(self, txn, parts, fail):
        pid, epoch = self.producers.get(txn, (0, 0))
        self._run(self.h.coordinator.handle_add_partitions(txn, pid, epoch, parts), fail)

    @rule(txn=st.sampled_from(IDS), commit=st.booleans(), fail=st.booleans())
    def end(self, txn, commit, fail):
        pid, epoch = self.producers.get(txn, (0, 0))
        self._run(self.h.coordinator.handle_end_transaction(txn, pid, epoch, commit), fail)

    @rule(ms=st.sampled_from([1_000, 6_000, 60_000]), fail=st.booleans())
    def time_passes(self, ms, fail):
        self.h.clock.sleep(ms)
        self._run(self.h.coordinator.abort_timed_out_transactions(), fail)
        self._run(self.h.coordinator.remove_expired_transactional_ids(), fail)

    @invariant()
    def a_fresh_load_equals_the_live_state(self):
        assert snapshot(self.h.reloaded()) == snapshot(self.h.state)


TxnReplayMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                              suppress_health_check=[HealthCheck.too_slow])
TestTxnReplayEquivalence = TxnReplayMachine.TestCase
