"""EndTxn's ordering, without I/O: the answer once PrepareCommit is durable, the markers after it, the
Complete record after them without an fsync of its own, and the id's next request waiting for the
markers (or answering CONCURRENT_TRANSACTIONS past the wait's bound).

Kafka: TransactionCoordinator.endTransaction (the PrepareCommit append's callback answers the client,
then sendTxnMarkersCallback hands the markers to TransactionMarkerChannelManager, whose completion
appends CompleteCommit); handleAddPartitionsToTransaction / handleInitProducerId answer
CONCURRENT_TRANSACTIONS while the state is PrepareCommit/PrepareAbort.
"""
from __future__ import annotations

import asyncio

from kcoord.coordinator.testing import ManualClock
from kcoord.protocol.errors import ErrorCode as E
from kcoord.txn.coordinator import TransactionCoordinator
from kcoord.txn.metadata import TxnState as S
from kcoord.txn.state_manager import TransactionStateManager, TxnConfig


class Harness:
    """A coordinator whose markers wait for `release`, whose completion runs as a task (keyed by id), and
    whose log remembers which records were fsynced: `crash()` keeps what the last fsync covered."""

    def __init__(self, wait_for_markers: bool = True) -> None:
        self.config = TxnConfig(num_partitions=1, max_timeout_ms=60000)
        self.state = TransactionStateManager(self.config)
        self.state.complete_load(0, {})
        self.log: list[tuple[bytes, bytes, bool]] = []  # (key, value, synced)
        self.markers: list = []
        self.release = asyncio.Event()
        self.tasks: dict[str, asyncio.Task] = {}
        self.wait_for_markers = wait_for_markers
        self.coordinator = self._coordinator(self.state)

    def _coordinator(self, state: TransactionStateManager) -> TransactionCoordinator:
        return TransactionCoordinator(
            state, append=self.append, append_unsynced=self.append_unsynced, write_markers=self.write_markers,
            allocate_producer_id=lambda: 100, clock=ManualClock(1_000_000), spawn=self.spawn,
            sleep=lambda _s: asyncio.sleep(0), wait_completed=self.wait_completed)

    async def append(self, partition, key, value):
        self.log.append((key, value, True))
        return E.NONE

    async def append_unsynced(self, partition, key, value):
        self.log.append((key, value, False))
        return E.NONE

    async def write_markers(self, pid, epoch, commit, partitions, coordinator_epoch=0, transaction_version=0):
        await self.release.wait()
        self.markers.append((pid, epoch, commit, sorted(partitions)))

    def spawn(self, coro, key=None):
        task = asyncio.get_running_loop().create_task(coro)
        if key is not None:
            self.tasks[key] = task
        return task

    async def wait_completed(self, transactional_id):
        task = self.tasks.get(transactional_id)
        if self.wait_for_markers and task is not None:
            await task  # (the runtime bounds this wait; past the bound the coordinator answers)

    def crash(self) -> TransactionStateManager:
        """A new coordinator's state from what an fsync covered: records after the last synced one are lost."""
        last = max((i for i, (_k, _v, synced) in enumerate(self.log) if synced), default=-1)
        fresh = TransactionStateManager(self.config)
        fresh.complete_load(0, fresh.load(0, [(k, v) for k, v, _s in self.log[:last + 1]]))
        return fresh


async def _open(h: Harness, tid: str = "t1") -> int:
    _, pid, _ = await h.coordinator.handle_init_producer_id(tid, 30000, None)
    assert await h.coordinator.handle_add_partitions(tid, pid, 0, [("x", 0), ("y", 1)]) == E.NONE
    return pid


def test_end_txn_answers_once_prepare_commit_is_durable_and_the_next_add_waits_for_the_markers():
    async def run():
        h = Harness()
        pid = await _open(h)
        assert await h.coordinator.handle_end_transaction("t1", pid, 0, True) == E.NONE
        assert h.state.get_state("t1").state == S.PREPARE_COMMIT and h.markers == []  # answered before them
        assert h.log[-1][2], "PrepareCommit is fsynced before the answer"
        nxt = asyncio.ensure_future(h.coordinator.handle_add_partitions("t1", pid, 0, [("x", 0)]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not nxt.done()  # waiting for the markers, not CONCURRENT_TRANSACTIONS
        h.release.set()
        assert await nxt == E.NONE
        assert h.markers == [(pid, 0, True, [("x", 0), ("y", 1)])]
        md = h.state.get_state("t1")
        assert (md.state, md.partitions) == (S.ONGOING, {("x", 0)})
        # PrepareCommit synced, CompleteCommit not (nothing is acknowledged on it), the next add synced
        assert [synced for _k, _v, synced in h.log[-3:]] == [True, False, True]
    asyncio.run(run())


def test_past_the_wait_the_next_requests_answer_concurrent_transactions_as_kafka():
    async def run():
        h = Harness(wait_for_markers=False)  # the wait's bound passed with the markers still unwritten
        pid = await _open(h)
        assert await h.coordinator.handle_end_transaction("t1", pid, 0, True) == E.NONE
        assert await h.coordinator.handle_add_partitions("t1", pid, 0, [("x", 0)]) == E.CONCURRENT_TRANSACTIONS
        assert (await h.coordinator.handle_init_producer_id("t1", 30000, None))[0] == E.CONCURRENT_TRANSACTIONS
        assert (await h.coordinator.end_transaction("t1", pid, 0, True, 0))[0] == E.CONCURRENT_TRANSACTIONS
        h.release.set()
        await h.tasks["t1"]
        assert await h.coordinator.handle_add_partitions("t1", pid, 0, [("x", 0)]) == E.NONE
    asyncio.run(run())


def test_a_crash_before_complete_commit_is_fsynced_completes_the_commit_again():
    """The Complete record is lost with its page cache: the load finds PrepareCommit, writes the markers
    again and completes; once the next add is fsynced, the Complete record before it is durable too."""
    async def run():
        h = Harness()
        pid = await _open(h)
        h.release.set()
        assert await h.coordinator.handle_end_transaction("t1", pid, 0, True) == E.NONE
        await h.tasks["t1"]
        assert h.state.get_state("t1").state == S.COMPLETE_COMMIT
        reloaded = h.crash()
        assert reloaded.get_state("t1").state == S.PREPARE_COMMIT
        h.markers.clear()
        again = h._coordinator(reloaded)
        again.on_loaded(0)
        await h.tasks["t1"]
        assert h.markers == [(pid, 0, True, [("x", 0), ("y", 1)])]
        assert reloaded.get_state("t1").state == S.COMPLETE_COMMIT
        assert await again.handle_add_partitions("t1", pid, 0, [("z", 2)]) == E.NONE
        md = h.crash().get_state("t1")
        assert (md.state, md.partitions) == (S.ONGOING, {("z", 2)})
    asyncio.run(run())
