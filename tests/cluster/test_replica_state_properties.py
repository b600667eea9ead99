"""Properties of PartitionReplication over random histories of appends, follower fetches, clock ticks,
ISR shrinks/expansions and their outcomes (Partition.scala's guarantees): on a leader that keeps its
epoch the high watermark never goes down and never passes the smallest log end over the (maximal) ISR;
it does not move below min ISR (KIP-966); an acks=all write is acknowledged only once the high watermark
covers it; a deposed leader acknowledges nothing more."""
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.cluster.replica_state import PartitionReplication
from kcoord.protocol.errors import ErrorCode

from .replication_support import FakeLog, registration

LAG = 1_000
T0 = 100 * LAG
FOLLOWERS = (2, 3)

ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5), st.booleans()),
    st.tuples(st.just("fetch"), st.sampled_from(FOLLOWERS), st.integers(0, 6)),
    st.tuples(st.just("tick"), st.integers(1, LAG)),
    st.tuples(st.just("shrink")),
    st.tuples(st.just("commit")),
    st.tuples(st.just("fail"), st.sampled_from([ErrorCode.INELIGIBLE_REPLICA, ErrorCode.INVALID_UPDATE_VERSION,
                                                ErrorCode.REQUEST_TIMED_OUT])),
    st.tuples(st.just("refresh")),
), max_size=60)


class History:
    """The leader under test, its followers' log ends (they only move forward, as a follower of one
    leader epoch does) and the registration as the store would hold it."""

    def __init__(self, directory, isr, min_isr, freeze):
        self.log = FakeLog(directory)
        self.reg = registration(isr=isr, leader_epoch=4, partition_epoch=9)
        self.log.leader_epochs.assign(4, 0)
        self.part = PartitionReplication(1, self.log, min_insync_replicas=min_isr, replica_lag_time_max_ms=LAG,
                                         freeze_hwm_below_min_isr=freeze)
        self.now = T0
        self.part.make_leader(self.reg, self.now)
        self.ends = {r: 0 for r in FOLLOWERS}
        self.acks = []
        self.acknowledged = []  # (ack, high watermark when it completed)
        self.deposed = False

    def step(self, op):
        part, kind = self.part, op[0]
        if kind == "append":
            required = self.log.append(op[1], epoch=4)
            part.on_leader_append(self.now)
            if op[2] and (self.deposed or part.acks_all_check() is ErrorCode.NONE):
                ack = part.wait_for(required)
                self.acks.append(ack)
                if ack.done:
                    self.acknowledged.append((ack, part.high_watermark))
        elif kind == "fetch":
            replica = op[1]
            self.ends[replica] = min(self.ends[replica] + op[2], self.log.log_end_offset)
            part.on_follower_fetch(replica, self.ends[replica], 4, 4, self.now)
        elif kind == "tick":
            self.now += op[1]
        elif kind == "shrink":
            part.maybe_shrink_isr(self.now)
        elif kind == "commit" and part.isr_state.in_flight:
            self.reg = self.reg.changed(isr=tuple(part.isr_state.request.new_isr),
                                        partition_epoch=self.reg.partition_epoch + 1)
            part.on_isr_change_committed(self.reg, self.now)
        elif kind == "fail":
            part.on_isr_change_failed(op[1])
        elif kind == "refresh":  # the watch delivers the stored registration again (same leader epoch)
            self.reg = self.reg.changed(partition_epoch=self.reg.partition_epoch + 1)
            if self.deposed:
                part.make_follower(self.reg)
            else:
                part.make_leader(self.reg, self.now)
        self.acknowledged += [(a, part.high_watermark) for a in part.take_completed()]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([(1, 2, 3), (1, 2), (1,)]), st.integers(1, 3), st.booleans(), ops, ops)
def test_leader_high_watermark_and_acks(isr, min_isr, freeze, before, after):
    with tempfile.TemporaryDirectory() as directory:
        h = History(directory, isr, min_isr, freeze)
        part = h.part
        for op in before:
            hw, under = part.high_watermark, part.is_under_min_isr
            h.step(op)
            assert part.high_watermark >= hw, f"the high watermark went down at {op}"
            assert part.high_watermark <= h.log.log_end_offset
            known = [h.ends[r] if part.followers[r].log_end_offset >= 0 else -1
                     for r in part.maximal_isr - {1}]
            assert part.high_watermark <= max(0, min([h.log.log_end_offset, *known])), (
                f"above a member's log end after {op}")
            if freeze and under and part.is_under_min_isr:
                assert part.high_watermark == hw, f"moved below min ISR at {op}"
        for ack, hw in h.acknowledged:
            if ack.error is ErrorCode.NONE:
                assert hw >= ack.required_offset
        waiting = [a for a in h.acks if not a.done]

        h.reg = h.reg.changed(leader=2, isr=(2,), leader_epoch=5, partition_epoch=h.reg.partition_epoch + 1)
        h.part.make_follower(h.reg)
        h.deposed = True
        deposed = part.take_completed()
        assert deposed == waiting
        assert all(a.error is ErrorCode.NOT_LEADER_OR_FOLLOWER for a in deposed)
        seen, acks_before = len(h.acknowledged), len(h.acks)
        for op in after:  # whatever the old leader's callers still do, nothing is acknowledged
            h.step(op)
        assert all(a.error is ErrorCode.NOT_LEADER_OR_FOLLOWER for a, _ in h.acknowledged[seen:])
        assert all(a.error is ErrorCode.NOT_LEADER_OR_FOLLOWER for a in h.acks[acks_before:]), "refused at once"
        assert all(a.error is ErrorCode.NOT_LEADER_OR_FOLLOWER for a in waiting)
        assert part.waiting == 0


def test_the_histories_reach_interesting_states():
    """The property above is not vacuous: a plain history advances the high watermark, expands and
    shrinks the ISR and acknowledges a write."""
    with tempfile.TemporaryDirectory() as directory:
        h = History(directory, (1, 2), 2, True)
        for op in [("append", 3, True), ("fetch", 2, 3), ("fetch", 3, 3), ("commit",), ("append", 2, True),
                   ("fetch", 2, 2), ("tick", LAG), ("tick", LAG), ("shrink",), ("commit",)]:
            h.step(op)
        assert h.part.high_watermark == 5 and h.part.isr == {1, 2}
        assert [a.error for a, _ in h.acknowledged] == [ErrorCode.NONE, ErrorCode.NONE]
