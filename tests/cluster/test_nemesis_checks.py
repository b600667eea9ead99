"""The Jepsen-style run's checker (tests/cluster/nemesis_checks.py) on hand-made histories: each property
is seen holding and seen broken."""
from __future__ import annotations

from tests.cluster.nemesis_checks import (
    Ack,
    Committed,
    Consumed,
    CoordinatorSample,
    LeaderSample,
    OffsetSample,
    committed_offset_regressions,
    duplicate_writes,
    duplicates_outside_uncommitted_window,
    lost_writes,
    two_active_coordinators_at_one_epoch,
    two_leaders_at_one_epoch,
)


def test_every_acknowledged_write_read_at_its_offset_holds():
    records = [(0, 0, "a"), (0, 1, "b"), (1, 0, "c")]
    assert lost_writes([Ack("a", 0, 0), Ack("c", 1, 0)], records) == []


def test_a_lost_or_moved_acknowledged_write_is_reported():
    records = [(0, 0, "a"), (0, 1, "b")]
    assert lost_writes([Ack("x", 0, 5), Ack("b", 0, 2)], records) == [
        "acknowledged x (p0@5) lost", "acknowledged b at p0@2, read at [(0, 1)]"]


def test_an_unacknowledged_record_read_back_is_no_loss_but_twice_is_a_duplicate():
    records = [(0, 0, "a"), (0, 1, "u"), (0, 2, "u")]
    assert lost_writes([Ack("a", 0, 0)], records) == []
    assert duplicate_writes(records) == ["u read 2 times"]
    assert duplicate_writes(records[:2]) == []


def test_committed_offsets_that_only_move_forward_hold():
    samples = [OffsetSample(0.0, 0.1, 0, 5, "commit"), OffsetSample(0.2, 0.3, 0, 5),
               OffsetSample(0.4, 0.5, 0, 9), OffsetSample(0.6, 0.7, 1, -1)]
    assert committed_offset_regressions(samples) == []


def test_a_fetch_below_an_acknowledged_commit_is_a_regression():
    samples = [OffsetSample(1.0, 1.1, 0, 12, "commit"), OffsetSample(2.0, 2.1, 0, -1)]
    assert committed_offset_regressions(samples) == [
        "p0: OffsetFetch sent at 2.000 s answered -1, but 12 was committed (commit answered at 1.100 s)"]


def test_a_fetch_below_an_earlier_fetch_is_a_regression_but_overlapping_ones_are_not_ordered():
    overlapping = [OffsetSample(1.0, 1.5, 0, 7, "commit"), OffsetSample(1.2, 1.3, 0, 3)]
    assert committed_offset_regressions(overlapping) == []  # sent before the commit was acknowledged
    later = [OffsetSample(1.0, 1.1, 0, 7), OffsetSample(1.2, 1.3, 0, 3), OffsetSample(1.2, 1.3, 1, 0)]
    assert len(committed_offset_regressions(later)) == 1


def test_one_leader_per_epoch_holds_across_nodes_and_stale_views():
    samples = [LeaderSample(0.0, 1, "t", 0, 1, 0), LeaderSample(0.1, 2, "t", 0, 1, 0),
               LeaderSample(0.5, 2, "t", 0, 2, 1), LeaderSample(0.6, 1, "t", 0, 1, 0),  # node 1 still at epoch 0
               LeaderSample(0.7, 3, "t", 0, -1, 2)]                                     # offline: no leader
    assert two_leaders_at_one_epoch(samples) == []


def test_two_leaders_at_one_epoch_are_reported():
    samples = [LeaderSample(0.0, 1, "t", 0, 1, 3), LeaderSample(0.2, 3, "t", 0, 3, 3),
               LeaderSample(0.2, 3, "t", 1, 3, 3)]
    assert two_leaders_at_one_epoch(samples) == [
        "t-0 epoch 3: leaders 1 (node 1 said so at 0.000 s), 3 (node 3 said so at 0.200 s)"]


def test_one_active_coordinator_per_epoch_holds_across_a_move():
    samples = [CoordinatorSample(1.0, 1, True, 3), CoordinatorSample(1.0, 2, False, 3),
               CoordinatorSample(2.0, 1, True, 3), CoordinatorSample(5.0, 2, True, 4),
               CoordinatorSample(5.1, 1, False, 4), CoordinatorSample(5.2, 3, False, 3)]  # 3 lags: not active
    assert two_active_coordinators_at_one_epoch(samples) == []


def test_two_nodes_serving_the_group_at_one_epoch_are_reported():
    samples = [CoordinatorSample(1.0, 1, True, 3), CoordinatorSample(4.0, 2, True, 3),
               CoordinatorSample(4.5, 2, True, 4), CoordinatorSample(4.6, 2, True, 3)]
    assert two_active_coordinators_at_one_epoch(samples) == [
        "coordinator epoch 3: served by nodes 1 (at 1.000 s), 2 (at 4.000 s)"]


def test_duplicates_after_the_last_commit_before_the_kill_are_within_the_window():
    consumed = [Consumed(1.0, 0, o) for o in range(10)] + [Consumed(6.0, 0, o) for o in range(7, 12)]
    committed = [Committed(2.0, 0, 7), Committed(8.0, 0, 12)]
    assert duplicates_outside_uncommitted_window(consumed, committed, kills=[5.0]) == []


def test_a_duplicate_below_an_acknowledged_commit_is_reported():
    consumed = [Consumed(1.0, 0, o) for o in range(10)] + [Consumed(6.0, 0, o) for o in range(5, 10)]
    committed = [Committed(2.0, 0, 7), Committed(5.5, 0, 10), Committed(1.5, 1, 99)]
    assert duplicates_outside_uncommitted_window(consumed, committed, kills=[5.0]) == [
        "p0@5 consumed again at 6.000 s, below 7, committed before the kill at 5.000 s",
        "p0@6 consumed again at 6.000 s, below 7, committed before the kill at 5.000 s"]


def test_duplicates_before_any_kill_and_commits_after_it_do_not_count():
    consumed = [Consumed(1.0, 0, 0), Consumed(2.0, 0, 0), Consumed(7.0, 0, 0)]
    committed = [Committed(6.0, 0, 1)]  # acknowledged after the kill: the window still starts at 0
    assert duplicates_outside_uncommitted_window(consumed, committed, kills=[5.0]) == []
    assert duplicates_outside_uncommitted_window(consumed, committed, kills=[5.0, 6.5]) == [
        "p0@0 consumed again at 7.000 s, below 1, committed before the kill at 6.500 s"]
