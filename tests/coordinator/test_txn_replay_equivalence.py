"""Transactional offsets, records out and replay in: after any mix of TxnOffsetCommits by several
producers, their COMMIT/ABORT markers, plain commits, group deletions and failing appends, loading the
partition's log -- the real batches the writer would append, through the real loader
(checkpoint_store.load: transactional batches held until their marker) -- gives the live shard's committed
offsets and pending transactional partitions."""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.coordinator import checkpoint_store
from kcoord.coordinator.results import OffsetCommit
from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.service import GroupCoordinatorService
from kcoord.coordinator.testing import Capture, CoordinatorContext, ManualClock, RecordingWriter
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import iter_batches, set_base_offset

GROUP = "g"
PRODUCERS = [1, 2, 3]


class MemLog:
    """What checkpoint_store reads of a partition log, over batches in memory."""

    def __init__(self, batches: list[bytes]) -> None:
        self._data = bytearray()
        offset = 0
        for batch in batches:
            b = bytearray(batch)
            set_base_offset(b, offset)
            self._data += b
            offset = next(iter_batches(bytes(b)))[1].next_offset
        self.log_start_offset = 0
        self.log_end_offset = offset

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        out = bytearray()
        for pos, header, _batch in iter_batches(bytes(self._data)):
            if header.last_offset >= offset and (max_offset is None or header.base_offset < max_offset):
                out += self._data[pos:pos + header.size]
        return bytes(out)


def live(ctx) -> tuple[dict, set]:
    shard = ctx.shard(GROUP)
    return ({tp: v.offset for tp, v in shard.offset_manager.committed(GROUP).items()},
            shard.offset_manager.transactional.partitions(GROUP))


def loaded(ctx) -> tuple[dict, set]:
    partition = ctx.gc.partition_for(GROUP)
    log = MemLog([a.to_batch() for a in ctx.writer.durable() if a.partition == partition])
    service = GroupCoordinatorService(clock=ManualClock(), writer=RecordingWriter())

    def load_partition(p, tail, state, keep):
        state.replay(tail, service.log)
        service.begin_load(p).load(state, keep)
        service.complete_load(p)

    checkpoint_store.load(log, partition, 0, load_partition, use_checkpoint=False)
    shard = service.shards[partition]
    return ({tp: v.offset for tp, v in shard.offset_manager.committed(GROUP).items()},
            shard.offset_manager.transactional.partitions(GROUP))


class TxnOffsetsMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = CoordinatorContext()

    def _maybe_failing(self, fail: bool, action) -> None:
        before = live(self.ctx)
        self.ctx.writer.auto_error = E.KAFKA_STORAGE_ERROR if fail else E.NONE
        try:
            action()
        finally:
            self.ctx.writer.auto_error = E.NONE
        if fail:
            assert live(self.ctx) == before

    @rule(pid=st.sampled_from(PRODUCERS), partition=st.integers(0, 2), offset=st.integers(0, 99), fail=st.booleans())
    def txn_commit(self, pid, partition, offset, fail):
        request = OffsetCommit(GROUP, "", None, -1, [P("t", partition, offset)], -1, 3)
        self._maybe_failing(fail, lambda: self.ctx.gc.txn_commit_offsets(request, pid, 0, Capture()))

    @rule(pid=st.sampled_from(PRODUCERS), commit=st.booleans(), fail=st.booleans())
    def marker(self, pid, commit, fail):
        self._maybe_failing(fail, lambda: self.ctx.gc.complete_transaction(
            self.ctx.gc.partition_for(GROUP), pid, 0, 0, commit, Capture()))

    @rule(partition=st.integers(0, 2), offset=st.integers(0, 99), fail=st.booleans())
    def plain_commit(self, partition, offset, fail):
        self._maybe_failing(fail, lambda: self.ctx.commit_offsets(GROUP, "", None, -1, [P("t", partition, offset)],
                                                                  Capture()))

    @rule(fail=st.booleans())
    def delete_group(self, fail):
        self._maybe_failing(fail, lambda: self.ctx.delete_groups([GROUP], Capture()))

    @invariant()
    def the_loader_gives_the_live_state(self):
        if self.ctx.gc.partition_for(GROUP) in self.ctx.gc.shards:
            assert loaded(self.ctx) == live(self.ctx)


TxnOffsetsMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                               suppress_health_check=[HealthCheck.too_slow])
TestTxnOffsetsReplay = TxnOffsetsMachine.TestCase
