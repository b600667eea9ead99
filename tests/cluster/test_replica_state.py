"""PartitionReplication against Kafka's Partition.scala / Replica.scala rules, with an injected clock."""
import pytest

from kcoord.cluster.leader_epochs import EpochEndOffset
from kcoord.cluster.replica_state import (
    NO_EPOCH,
    PartitionReplication,
    PendingExpandIsr,
    PendingShrinkIsr,
    Role,
)
from kcoord.protocol.errors import ErrorCode

from .replication_support import FakeLog, leader, registration

LAG = 30_000


def fetch(part, replica, offset, now, epoch=None, last_epoch=NO_EPOCH, **kw):
    return part.on_follower_fetch(replica, offset, part.leader_epoch if epoch is None else epoch, last_epoch, now,
                                  **kw)


# -- the high watermark --------------------------------------------------------------------------


def test_high_watermark_is_the_smallest_log_end_over_the_isr(tmp_path):
    """Partition.maybeIncrementLeaderHW: every ISR member's log end bounds it, and a new leader waits
    for every member's first fetch (their log ends are unknown until then, Replica.resetReplicaState)."""
    part = leader(tmp_path)
    part.log.append(10, epoch=0)
    assert not part.on_leader_append(0)
    assert part.high_watermark == 0
    fetch(part, 2, 10, 1)
    assert part.high_watermark == 0, "replica 3 has not fetched yet"
    d = fetch(part, 3, 5, 2)
    assert d.high_watermark_advanced and part.high_watermark == 5
    assert d.high_watermark == 0, "the response carries the value from before this fetch (LogReadInfo)"
    fetch(part, 3, 10, 3)
    assert part.high_watermark == 10


def test_a_lagging_replica_outside_the_isr_does_not_hold_the_high_watermark(tmp_path):
    """Only the ISR, and followers caught up within replica.lag.time.max.ms (about to join), count."""
    t0 = 10 * LAG  # a replica outside the ISR starts as last caught up at time 0 (resetReplicaState)
    part = leader(tmp_path, registration(isr=(1, 2)), now=t0, replica_lag_time_max_ms=LAG)
    part.log.append(10, epoch=0)
    fetch(part, 2, 10, t0 + 1)
    assert part.high_watermark == 10
    d = fetch(part, 3, 4, t0 + 2)  # far behind
    assert part.high_watermark == 10 and d.isr_change is None


def test_a_caught_up_replica_outside_the_isr_holds_the_high_watermark(tmp_path):
    """shouldWaitForReplicaToJoinIsr: a follower caught up within the lag is waited for, so the high
    watermark does not run away from it before it joins."""
    part = leader(tmp_path, registration(isr=(1, 2)))
    fetch(part, 3, 0, 10)  # at our log end (0): caught up now
    part.log.append(10, epoch=0)
    fetch(part, 2, 10, 20)
    assert part.high_watermark == 0
    fetch(part, 3, 7, 30)
    assert part.high_watermark == 7


def test_an_isr_of_the_leader_alone_follows_the_log_end(tmp_path):
    part = leader(tmp_path, registration(replicas=(1,), isr=(1,)))
    part.log.append(3, epoch=0)
    assert part.on_leader_append(5)
    assert part.high_watermark == 3


# -- shrinking and expanding the ISR -------------------------------------------------------------


def test_a_follower_lagging_longer_than_the_max_lag_is_proposed_for_removal(tmp_path):
    """Partition.getOutOfSyncReplicas / ReplicaState.isCaughtUp; the shrink counts only once committed
    (PendingShrinkIsr's maximal ISR is the committed one); one change at a time."""
    part = leader(tmp_path, now=0, replica_lag_time_max_ms=LAG)
    part.log.append(10, epoch=0)
    fetch(part, 2, 10, 100)
    fetch(part, 3, 4, 100)
    assert part.maybe_shrink_isr(LAG) is None, "within the lag since make_leader"
    fetch(part, 2, 10, LAG)
    request = part.maybe_shrink_isr(LAG + 1)
    assert request is not None and tuple(request.new_isr) == (1, 2)
    assert (request.leader_id, request.leader_epoch, request.partition_epoch) == (1, 0, 0)
    assert isinstance(part.isr_state, PendingShrinkIsr)
    assert part.maybe_shrink_isr(LAG + 2) is None, "a change is in flight"
    assert part.high_watermark == 4, "3 still counts until the shrink is committed"
    assert part.on_isr_change_committed(registration(isr=(1, 2), partition_epoch=1), LAG + 3)
    assert part.isr == {1, 2} and part.partition_epoch == 1
    assert part.high_watermark == 10


def test_a_follower_fetching_at_the_log_end_is_never_out_of_sync(tmp_path):
    part = leader(tmp_path, replica_lag_time_max_ms=LAG)
    fetch(part, 2, 0, 1)
    fetch(part, 3, 0, 1)
    assert part.maybe_shrink_isr(10 * LAG) is None


def test_a_slow_follower_that_keeps_reaching_the_previous_log_end_stays(tmp_path):
    """Replica.updateFetchStateOrThrow: fetching from where our log ended at its previous fetch counts
    as caught up at that previous fetch's time, although it never reaches the current end."""
    part = leader(tmp_path, replica_lag_time_max_ms=LAG)
    fetch(part, 2, 0, 0)
    for step in range(1, 6):
        part.log.append(5, epoch=0)
        now = step * (LAG // 2)
        fetch(part, 2, part.log.log_end_offset - 5, now)
        fetch(part, 3, part.log.log_end_offset, now)
        assert 2 not in part.out_of_sync_replicas(now)


def test_a_follower_at_the_high_watermark_and_the_epoch_start_is_proposed_for_addition(tmp_path):
    """Partition.isFollowerInSync: its log end reaches the high watermark *and* the start offset of the
    current leader epoch; the pending member counts at once for the high watermark (PendingExpandIsr)."""
    t0 = 10 * LAG
    part = leader(tmp_path, registration(isr=(1, 2), leader_epoch=3), now=t0, log_end_offset=8,
                  entries=[(1, 0)], replica_lag_time_max_ms=LAG)
    assert part.leader_epoch_start_offset == 8
    fetch(part, 2, 8, t0 + 1)
    assert part.high_watermark == 8
    d = fetch(part, 3, 6, t0 + 5)  # below the epoch start: not in sync
    assert d.isr_change is None
    part.log.append(4, epoch=3)
    fetch(part, 2, 12, t0 + 6)
    assert part.high_watermark == 12
    d = fetch(part, 3, 10, t0 + 7)  # past the epoch start, below the high watermark
    assert d.isr_change is None
    d = fetch(part, 3, 12, t0 + 8)
    assert d.isr_change is not None and tuple(d.isr_change.new_isr) == (1, 2, 3)
    assert isinstance(part.isr_state, PendingExpandIsr) and part.maximal_isr == {1, 2, 3}
    part.log.append(3, epoch=3)
    fetch(part, 2, 15, t0 + 9)
    assert part.high_watermark == 12, "the pending member already holds the high watermark"
    assert fetch(part, 3, 15, t0 + 9).isr_change is None, "one change at a time"


def test_an_ineligible_follower_is_not_added(tmp_path):
    """isReplicaIsrEligible (KRaft: fenced, shutting down, or a stale broker epoch) is the metadata's
    answer, injected."""
    part = leader(tmp_path, registration(isr=(1, 2)),
                  is_isr_eligible=lambda r, broker_epoch: broker_epoch == 7)
    fetch(part, 2, 0, 1)
    assert fetch(part, 3, 0, 2, broker_epoch=6).isr_change is None
    request = fetch(part, 3, 0, 3, broker_epoch=7).isr_change
    assert request is not None and dict(request.isr_broker_epochs)[3] == 7


@pytest.mark.parametrize("error", [ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED])
def test_a_refused_change_goes_back_to_the_committed_isr(tmp_path, error):
    """Partition.handleAlterPartitionError: the controller says it was not applied."""
    part = leader(tmp_path, registration(isr=(1, 2)))
    fetch(part, 2, 0, 1)
    assert fetch(part, 3, 0, 2).isr_change is not None
    assert part.on_isr_change_failed(error) is None
    assert not part.isr_state.in_flight and part.maximal_isr == {1, 2}


def test_a_lost_compare_and_set_waits_for_the_newer_registration(tmp_path):
    """INVALID_UPDATE_VERSION (someone wrote the partition first) keeps the change pending until the
    metadata brings the new state (make_leader at the same leader epoch resets the ISR)."""
    part = leader(tmp_path, registration(isr=(1, 2)))
    fetch(part, 2, 0, 1)
    assert fetch(part, 3, 0, 2).isr_change is not None
    assert part.on_isr_change_failed(ErrorCode.INVALID_UPDATE_VERSION) is None
    assert part.isr_state.in_flight
    assert part.on_isr_change_failed(ErrorCode.REQUEST_TIMED_OUT) is part.isr_state.request, "retried"
    assert not part.make_leader(registration(isr=(1, 2), partition_epoch=4), 3), "not a new leader"
    assert not part.isr_state.in_flight and part.partition_epoch == 4
    assert fetch(part, 3, 0, 4).isr_change.partition_epoch == 4


def test_a_stale_commit_is_ignored(tmp_path):
    """handleAlterPartitionUpdate ignores another leader epoch or an older partition epoch; a change
    that moved the leadership away (NEW_LEADER_ELECTED) stays pending until we follow."""
    part = leader(tmp_path, registration(isr=(1, 2), leader_epoch=2, partition_epoch=5))
    fetch(part, 2, 0, 1)
    fetch(part, 3, 0, 2)
    assert not part.on_isr_change_committed(registration(leader_epoch=1, partition_epoch=6), 3)
    assert not part.on_isr_change_committed(registration(leader_epoch=2, partition_epoch=4), 3)
    assert not part.on_isr_change_committed(
        registration(leader=2, leader_epoch=2, partition_epoch=6), 3)
    assert part.isr_state.in_flight


# -- acks=all --------------------------------------------------------------------------------------


def test_acks_all_completes_when_the_high_watermark_reaches_it(tmp_path):
    """DelayedProduce through Partition.checkEnoughReplicasReachOffset (requiredOffset = last + 1)."""
    part = leader(tmp_path, min_insync_replicas=2)
    assert part.acks_all_check() is ErrorCode.NONE
    first = part.wait_for(part.log.append(5, epoch=0))
    second = part.wait_for(part.log.append(5, epoch=0))
    assert not first.done and part.waiting == 2
    fetch(part, 2, 5, 1)
    fetch(part, 3, 7, 1)
    assert part.take_completed() == [first] and first.error is ErrorCode.NONE
    fetch(part, 2, 10, 2)
    fetch(part, 3, 10, 2)
    assert part.take_completed() == [second] and second.error is ErrorCode.NONE
    assert part.take_completed() == []


def test_acks_all_already_reached_is_done_at_once(tmp_path):
    part = leader(tmp_path, registration(replicas=(1,), isr=(1,)))
    required = part.log.append(2, epoch=0)
    part.on_leader_append(0)
    ack = part.wait_for(required)
    assert ack.done and ack.error is ErrorCode.NONE and part.take_completed() == []


@pytest.mark.parametrize("depose", ["follow", "stop"])
def test_every_waiting_write_fails_when_leadership_is_lost(tmp_path, depose):
    """A deposed leader never acknowledges: make_follower / stop fail them all with
    NOT_LEADER_OR_FOLLOWER, and nothing later completes them."""
    part = leader(tmp_path)
    acks = [part.wait_for(part.log.append(1, epoch=0)) for _ in range(3)]
    fetch(part, 2, 3, 1)
    if depose == "follow":
        assert part.make_follower(registration(isr=(2, 3), leader=2, leader_epoch=1, partition_epoch=1))
    else:
        part.stop()
    assert part.take_completed() == acks
    assert all(a.error is ErrorCode.NOT_LEADER_OR_FOLLOWER for a in acks)
    assert fetch(part, 3, 3, 2, epoch=0).error is not ErrorCode.NONE
    assert part.wait_for(4).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.acks_all_check() is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_acks_all_is_refused_below_min_isr(tmp_path):
    """Partition.appendRecordsToLeader: the committed ISR below min(min.insync.replicas, RF)."""
    part = leader(tmp_path, registration(isr=(1,)), min_insync_replicas=2)
    assert part.acks_all_check() is ErrorCode.NOT_ENOUGH_REPLICAS
    (tmp_path / "rf1").mkdir()
    capped = leader(tmp_path / "rf1", registration(replicas=(1,), isr=(1,)), min_insync_replicas=2)
    assert capped.acks_all_check() is ErrorCode.NONE, "min ISR is capped by the replication factor"


def shrink_below_min_isr(part):
    """ISR {1,2,3}, min ISR 3: an acks=all write appended, 2 keeps up, 3 stops and is removed."""
    required = part.log.append(5, epoch=0)
    ack = part.wait_for(required)
    fetch(part, 2, 0, 0)
    fetch(part, 3, 0, 0)
    fetch(part, 2, 5, LAG + 1)
    request = part.maybe_shrink_isr(LAG + 1)
    assert tuple(request.new_isr) == (1, 2)
    part.on_isr_change_committed(registration(isr=(1, 2), partition_epoch=1), LAG + 2)
    return ack


def test_below_min_isr_the_high_watermark_is_frozen_and_the_write_waits(tmp_path):
    """Kafka 3.7+ (KIP-966, maybeIncrementLeaderHW's isUnderMinIsr): after the shrink the high
    watermark does not move, so the write is not acknowledged by fewer replicas than min ISR; it
    completes if the ISR grows back, else the caller times it out (REQUEST_TIMED_OUT)."""
    part = leader(tmp_path, min_insync_replicas=3, replica_lag_time_max_ms=LAG)
    ack = shrink_below_min_isr(part)
    assert part.high_watermark == 0 and not ack.done and part.is_under_min_isr
    assert part.acks_all_check() is ErrorCode.NOT_ENOUGH_REPLICAS
    request = fetch(part, 3, 5, LAG + 3).isr_change
    assert tuple(request.new_isr) == (1, 2, 3)
    part.on_isr_change_committed(registration(isr=(1, 2, 3), partition_epoch=2), LAG + 4)
    assert part.high_watermark == 5 and ack.error is ErrorCode.NONE


def test_before_kip_966_a_shrink_below_min_isr_answers_after_append(tmp_path):
    """Kafka <= 3.6 (freeze_hwm_below_min_isr=False): the high watermark follows the smaller ISR and the
    waiting write gets NOT_ENOUGH_REPLICAS_AFTER_APPEND (checkEnoughReplicasReachOffset)."""
    part = leader(tmp_path, min_insync_replicas=3, replica_lag_time_max_ms=LAG, freeze_hwm_below_min_isr=False)
    ack = shrink_below_min_isr(part)
    assert part.high_watermark == 5
    assert part.take_completed() == [ack] and ack.error is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_a_timed_out_write_is_forgotten(tmp_path):
    part = leader(tmp_path)
    ack = part.wait_for(part.log.append(1, epoch=0))
    part.expire(ack)
    fetch(part, 2, 1, 1)
    fetch(part, 3, 1, 1)
    assert part.high_watermark == 1 and not ack.done and part.take_completed() == []


# -- fetch checks ----------------------------------------------------------------------------------


def test_fetch_leader_epoch_checks(tmp_path):
    """Partition.checkCurrentLeaderEpoch, then followerReplicaOrThrow."""
    part = leader(tmp_path, registration(leader_epoch=5))
    assert fetch(part, 2, 0, 1, epoch=4).error is ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(part, 2, 0, 1, epoch=6).error is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(part, 2, 0, 1, epoch=5).error is ErrorCode.NONE
    assert fetch(part, 2, 0, 1, epoch=NO_EPOCH).error is ErrorCode.NONE
    assert fetch(part, 9, 0, 1, epoch=5).error is ErrorCode.UNKNOWN_LEADER_EPOCH, "not a replica (yet)"
    assert fetch(part, 9, 0, 1, epoch=NO_EPOCH).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(part, 2, 1, 1).error is ErrorCode.OFFSET_OUT_OF_RANGE, "beyond our log end"


def test_a_follower_does_not_serve_follower_fetches(tmp_path):
    log = FakeLog(tmp_path)
    part = PartitionReplication(2, log)
    assert part.make_follower(registration(leader_epoch=3))
    assert part.role is Role.FOLLOWER and part.isr == frozenset()
    assert part.on_follower_fetch(3, 0, 3, NO_EPOCH, 0).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part.check_current_leader_epoch(2) is ErrorCode.FENCED_LEADER_EPOCH
    assert part.offset_for_leader_epoch(3, 3, require_leader=False)[0] is ErrorCode.NONE


def test_diverging_epoch_from_the_cache(tmp_path):
    """Partition.readRecords: the end of the follower's last fetched epoch in our cache is below its
    fetch offset -> DivergingEpoch {epoch, end offset}, nothing read and its state untouched."""
    part = leader(tmp_path, registration(leader_epoch=4), log_end_offset=10, entries=[(0, 0), (2, 6)])
    # the follower wrote epoch 2 up to 8, we only up to 10 -- but epoch 4 started at 10: epoch 2 ends at 10
    assert fetch(part, 2, 8, 1, last_epoch=2).diverging_epoch is None
    # a follower with epoch 3 (which we never had) up to 12
    d = fetch(part, 3, 12, 1, last_epoch=3)
    assert d.diverging_epoch == EpochEndOffset(2, 10) and d.error is ErrorCode.NONE
    assert part.followers[3].log_end_offset == -1, "a diverging fetch does not update the follower"
    # epoch 0 ends where epoch 2 starts
    assert fetch(part, 3, 7, 1, last_epoch=0).diverging_epoch == EpochEndOffset(0, 6)
    # an epoch newer than all of ours cannot be placed
    assert fetch(part, 3, 7, 1, last_epoch=9).error is ErrorCode.OFFSET_OUT_OF_RANGE


# -- the follower side ----------------------------------------------------------------------------


def test_follower_high_watermark_is_the_leaders_bounded_by_its_log(tmp_path):
    """ReplicaFetcherThread.processPartitionData -> UnifiedLog.updateHighWatermark."""
    log = FakeLog(tmp_path, [(0, 0)], log_end_offset=5)
    part = PartitionReplication(2, log)
    part.make_follower(registration())
    assert part.on_fetch_response(9) == 5
    log.append(5, epoch=0)
    assert part.on_fetch_response(9) == 9
    assert part.on_fetch_response(7) == 7, "a new leader's lower value is taken"
    log.truncate_to(6)
    part.on_log_truncated()
    assert part.high_watermark == 6


def test_offset_for_leader_epoch_answers(tmp_path):
    """Partition.lastOffsetForLeaderEpoch."""
    part = leader(tmp_path, registration(leader_epoch=2), log_end_offset=9, entries=[(0, 0), (1, 4)])
    assert part.offset_for_leader_epoch(2, 1) == (ErrorCode.NONE, EpochEndOffset(1, 9))
    assert part.offset_for_leader_epoch(2, 2) == (ErrorCode.NONE, EpochEndOffset(2, 9))
    assert part.offset_for_leader_epoch(2, 0) == (ErrorCode.NONE, EpochEndOffset(0, 4))
    assert part.offset_for_leader_epoch(2, 7) == (ErrorCode.NONE, EpochEndOffset())
    assert part.offset_for_leader_epoch(1, 0)[0] is ErrorCode.FENCED_LEADER_EPOCH


def test_make_leader_ignores_an_older_partition_epoch(tmp_path):
    part = leader(tmp_path, registration(leader_epoch=2, partition_epoch=7))
    assert not part.make_leader(registration(isr=(1,), leader_epoch=2, partition_epoch=6), 5)
    assert part.isr == {1, 2, 3}
    assert not part.make_follower(registration(leader=2, leader_epoch=3, partition_epoch=6))
    assert part.is_leader
