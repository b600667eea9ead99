"""The transaction coordinator following `__transaction_state` leadership (issue #27; Kafka's
TransactionCoordinator.onElection / onResignation and TransactionStateManager.appendTransactionToLog,
core/src/main/scala/kafka/coordinator/transaction/): nothing is served before an election, a partition
loads at its leader epoch (the coordinator epoch its markers carry), an append is answered only when the
ISR holds it -- its failures mapped as Kafka maps them, the metadata unchanged -- and a resignation
unloads the partition (NOT_COORDINATOR), failing what was waiting.

The partition log is a real one in tmp_path; replication is a stand-in whose acks=all waits the test
answers, so nothing here depends on time."""
from __future__ import annotations

import asyncio

from kcoord.protocol.errors import ErrorCode as E
from kcoord.storage import LogManager
from kcoord.txn.runtime import TransactionRuntime
from kcoord.txn.state_manager import TRANSACTION_STATE_TOPIC, TxnConfig

TXN = "t"


class Replication:
    """ReplicaManager's surface for the coordinator: leading or not; each acks=all wait is a future the
    test answers (or `auto`: answered at once with NONE)."""

    def __init__(self) -> None:
        self.leading = True
        self.auto = True
        self.waiting: list[asyncio.Future] = []

    def produce_error(self, topic, partition, acks):
        return E.NONE if self.leading else E.NOT_LEADER_OR_FOLLOWER

    def on_leader_append(self, topic, partition):
        pass

    async def wait_acks_all(self, topic, partition, last_offset, timeout_ms):
        if self.auto:
            return E.NONE
        future = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        return await future

    async def answer(self, error: E) -> None:
        while not self.waiting:
            await asyncio.sleep(0)
        self.waiting.pop(0).set_result(error)


class Markers:
    """The marker channel: records each call; while `stuck`, a call never returns (a leader unreachable)."""

    def __init__(self) -> None:
        self.sent: list[tuple] = []
        self.stuck = False

    async def __call__(self, producer_id, epoch, commit, partitions, coordinator_epoch, transaction_version=0):
        self.sent.append((producer_id, epoch, commit, sorted(partitions), coordinator_epoch))
        if self.stuck:
            await asyncio.get_running_loop().create_future()


def _runtime(tmp_path, replication: Replication, markers: Markers) -> TransactionRuntime:
    logs = LogManager(str(tmp_path))
    pids = iter(range(100, 200))
    return TransactionRuntime(TxnConfig(num_partitions=1), lambda p: logs.get_or_create(TRANSACTION_STATE_TOPIC, p),
                              markers, lambda: next(pids),
                              lambda p: logs.get_or_create(TRANSACTION_STATE_TOPIC, p),
                              follow_leadership=True, replication=lambda: replication)


async def _elected(tmp_path, leader_epoch: int, markers: Markers | None = None
                   ) -> tuple[TransactionRuntime, Replication]:
    """A started runtime elected for partition 0 at `leader_epoch`, loaded."""
    replication = Replication()
    runtime = _runtime(tmp_path, replication, markers or Markers())
    await runtime.start()
    runtime.on_election(0, leader_epoch)
    await _settle()
    return runtime, replication


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _init_waiting_for_the_isr(runtime: TransactionRuntime, replication: Replication) -> asyncio.Future:
    """An InitProducerId of TXN whose append waits for the ISR: the test answers it (`replication.answer`)."""
    replication.auto = False
    pending = asyncio.ensure_future(runtime.coordinator.handle_init_producer_id(TXN, 60000, None))
    await _settle()
    return pending


async def _until(condition, what: str) -> None:
    """The log's fsync runs in a thread: give the loop turns until `condition()` (bounded)."""
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"not reached: {what}")


def test_served_only_after_an_election_and_its_load(tmp_path):
    async def run():
        runtime = _runtime(tmp_path, Replication(), Markers())
        await runtime.start()
        coordinator = runtime.coordinator
        assert (await coordinator.handle_init_producer_id(TXN, 60000, None))[0] == E.NOT_COORDINATOR
        runtime.hold_load([0])
        runtime.on_election(0, 3)
        assert (await coordinator.handle_init_producer_id(TXN, 60000, None))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        runtime.release_load()
        await _settle()
        assert runtime.state.coordinator_epoch(0) == 3
        assert await coordinator.handle_init_producer_id(TXN, 60000, None) == (E.NONE, 100, 0)
        await runtime.close()
    asyncio.run(run())


def test_an_append_is_answered_when_replicated_and_a_failure_changes_nothing(tmp_path):
    async def run():
        runtime, replication = await _elected(tmp_path, 1)
        coordinator = runtime.coordinator
        assert (await coordinator.handle_init_producer_id(TXN, 60000, None))[0] == E.NONE  # epoch 0
        pending = await _init_waiting_for_the_isr(runtime, replication)
        assert not pending.done() and runtime.state.get_state(TXN).producer_epoch == 0
        await replication.answer(E.NONE)
        assert (await pending)[0] == E.NONE and runtime.state.get_state(TXN).producer_epoch == 1
        # the ISR cannot take it: COORDINATOR_NOT_AVAILABLE, the epoch stays
        pending = asyncio.ensure_future(coordinator.handle_init_producer_id(TXN, 60000, None))
        await replication.answer(E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        assert (await pending)[0] == E.COORDINATOR_NOT_AVAILABLE
        assert runtime.state.get_state(TXN).producer_epoch == 1 and not runtime.state.get_state(TXN).pending
        # not the leader any more before the append: NOT_COORDINATOR
        replication.leading = False
        assert (await coordinator.handle_init_producer_id(TXN, 60000, None))[0] == E.NOT_COORDINATOR
        await runtime.close()
    asyncio.run(run())


def test_a_resignation_unloads_and_fails_the_waiting_append(tmp_path):
    async def run():
        runtime, replication = await _elected(tmp_path, 1)
        coordinator = runtime.coordinator
        assert (await coordinator.handle_init_producer_id(TXN, 60000, None))[0] == E.NONE
        pending = await _init_waiting_for_the_isr(runtime, replication)
        runtime.on_resignation(0, 2)
        await replication.answer(E.NOT_LEADER_OR_FOLLOWER)  # the ReplicaManager fails it as it steps down
        assert (await pending)[0] == E.NOT_COORDINATOR
        assert runtime.state.get_state(TXN) == E.NOT_COORDINATOR
        await runtime.close()
    asyncio.run(run())


def test_a_replicated_append_whose_partition_changed_term_answers_not_coordinator(tmp_path):
    """appendTransactionToLog's callback: the coordinator epoch is not the one the append started under."""
    async def run():
        runtime, replication = await _elected(tmp_path, 1)
        pending = await _init_waiting_for_the_isr(runtime, replication)
        runtime.on_resignation(0, 1)
        runtime.on_election(0, 2)
        await replication.answer(E.NONE)
        assert (await pending)[0] == E.NOT_COORDINATOR
        await runtime.close()
    asyncio.run(run())


def test_markers_carry_the_coordinator_epoch_and_a_load_completes_what_was_prepared(tmp_path):
    async def run():
        markers = Markers()
        runtime, _ = await _elected(tmp_path, 4, markers)
        coordinator = runtime.coordinator
        _, pid, epoch = await coordinator.handle_init_producer_id(TXN, 60000, None)
        assert await coordinator.handle_add_partitions(TXN, pid, epoch, [("out", 0)]) == E.NONE
        markers.stuck = True  # the markers cannot be written before the partition moves away
        assert await coordinator.handle_end_transaction(TXN, pid, epoch, True) == E.NONE
        await _settle()
        assert markers.sent == [(pid, epoch, True, [("out", 0)], 4)]
        runtime.on_resignation(0, 4)  # the marker work of the partition stops with it
        markers.stuck = False
        runtime.on_election(0, 6)  # this node again, a later term: the load finds PrepareCommit
        await _settle()
        await _until(lambda: len(markers.sent) == 2, "markers sent again")
        assert markers.sent == [(pid, epoch, True, [("out", 0)], 4), (pid, epoch, True, [("out", 0)], 6)]
        await _until(lambda: runtime.state.get_state(TXN).state.name == "COMPLETE_COMMIT", "CompleteCommit")
        await runtime.close()
    asyncio.run(run())
