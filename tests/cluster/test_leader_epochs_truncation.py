"""Follower truncation by leader epochs: the scenarios of KIP-101 and KIP-279, computed as
AbstractFetcherThread.getOffsetTruncationState does, with the leader's answers from its own cache
(LeaderEpochFileCache.endOffsetFor through Partition.lastOffsetForLeaderEpoch / readRecords)."""
from kcoord.cluster.leader_epochs import EpochEndOffset, TruncationState, truncation_point
from kcoord.cluster.replica_state import PartitionReplication

from .replication_support import FakeLog, leader, registration


def logs(tmp_path, leader_entries, leader_end, follower_entries, follower_end):
    (tmp_path / "l").mkdir()
    (tmp_path / "f").mkdir()
    return (FakeLog(tmp_path / "l", leader_entries, leader_end),
            FakeLog(tmp_path / "f", follower_entries, follower_end))


def leader_answer(log, epoch):
    found_epoch, end = log.leader_epochs.end_offset_for(epoch, log.log_end_offset)
    return EpochEndOffset(found_epoch, end)


def test_kip101_a_restarted_follower_keeps_what_its_high_watermark_had_not_covered(tmp_path):
    """KIP-101 scenario 1: truncating to the high watermark after a restart lost acknowledged data;
    with epochs the follower keeps both records (the leader's epoch 0 ends at its log end, 2)."""
    lead, follow = logs(tmp_path, [(0, 0)], 2, [(0, 0)], 2)
    state = truncation_point(follow.leader_epochs, 2, leader_answer(lead, 0), fetch_offset=1)
    assert state == TruncationState(2, True)


def test_kip101_divergent_logs_after_a_double_failure(tmp_path):
    """KIP-101 scenario 2: A wrote offsets 0-1 in epoch 0, B only 0; B leads epoch 1 and writes offset 1
    anew. A asks for epoch 0, which ends at 1 on B: A cuts its offset 1 and fetches B's."""
    lead, follow = logs(tmp_path, [(0, 0), (1, 1)], 2, [(0, 0)], 2)
    assert leader_answer(lead, 0) == EpochEndOffset(0, 1)
    assert truncation_point(follow.leader_epochs, 2, leader_answer(lead, 0), 0) == TruncationState(1, True)


def test_kip279_follower_with_an_epoch_the_leader_never_had(tmp_path):
    """KIP-279: the follower led epoch 1 briefly (offsets 8-11) while the leader went from 0 to 2. The
    leader answers for 1 with its largest epoch below (0) ending where 2 starts (10); both agree on epoch
    0 only up to the follower's end of it (8)."""
    lead, follow = logs(tmp_path, [(0, 0), (2, 10)], 15, [(0, 0), (1, 8)], 12)
    answer = leader_answer(lead, 1)
    assert answer == EpochEndOffset(0, 10)
    assert truncation_point(follow.leader_epochs, 12, answer, 0) == TruncationState(8, True)


def test_kip279_step_back_through_an_epoch_the_follower_never_had(tmp_path):
    """The leader answers with an epoch the follower skipped: cut to the end of the follower's largest
    epoch below it, not final; ask again with the new latest epoch; then the final cut."""
    lead, follow = logs(tmp_path, [(0, 0), (1, 4), (3, 7)], 12, [(0, 0), (2, 5)], 9)
    answer = leader_answer(lead, 2)
    assert answer == EpochEndOffset(1, 7)
    first = truncation_point(follow.leader_epochs, 9, answer, 0)
    assert first == TruncationState(5, False)
    follow.truncate_to(first.offset)
    assert follow.leader_epochs.latest_epoch == 0
    second = truncation_point(follow.leader_epochs, 5, leader_answer(lead, 0), 0)
    assert second == TruncationState(4, True)


def test_an_undefined_answer_falls_back_to_the_fetch_offset(tmp_path):
    """The leader cannot place the epoch (UNDEFINED offset): truncate to the fetch offset (the high
    watermark for a replica without epochs); an offset without an epoch (v0) is taken as it is."""
    _, follow = logs(tmp_path, [], 0, [(3, 0)], 9)
    assert truncation_point(follow.leader_epochs, 9, EpochEndOffset(), 6) == TruncationState(6, True)
    assert truncation_point(follow.leader_epochs, 9, EpochEndOffset(-1, 4), 6) == TruncationState(4, True)
    (tmp_path / "e").mkdir()
    empty = FakeLog(tmp_path / "e", [], 9)
    assert truncation_point(empty.leader_epochs, 9, EpochEndOffset(2, 5), 0) == TruncationState(5, True)


def test_a_returning_leader_truncates_through_diverging_epoch_and_rejoins(tmp_path):
    """End to end on two PartitionReplication objects: the old leader (2) wrote offsets 10-13 in epoch 0
    that nobody else has; broker 1 leads epoch 1 from offset 10 and writes 10-11. Broker 2 follows:
    its Fetch (last fetched epoch 0, offset 14) gets DivergingEpoch {0, 10}, it cuts to 10, fetches
    again from 10 -- which is the start of epoch 1 and not below the high watermark, so it is proposed
    for the ISR at once -- and catches up."""
    (tmp_path / "l").mkdir()
    (tmp_path / "f").mkdir()
    reg = registration(isr=(1, 3), leader_epoch=1, partition_epoch=3)
    lead = leader(tmp_path / "l", reg, log_end_offset=10, entries=[(0, 0)], now=10**6)
    lead.log.append(2, epoch=1)
    old = FakeLog(tmp_path / "f", [(0, 0)], 14)
    follower = PartitionReplication(2, old, high_watermark=8)
    assert follower.make_follower(reg)
    d = lead.on_follower_fetch(2, 14, 1, follower.last_fetched_epoch, 10**6)
    assert d.diverging_epoch == EpochEndOffset(0, 10)
    cut = follower.truncation_point(d.diverging_epoch, fetch_offset=14)
    assert cut == TruncationState(10, True)
    old.truncate_to(cut.offset)
    follower.on_log_truncated()
    d = lead.on_follower_fetch(2, 10, 1, follower.last_fetched_epoch, 10**6 + 1)
    assert d.diverging_epoch is None and d.error.name == "NONE"
    # at the start of epoch 1 and at the high watermark (nobody has confirmed anything yet): in sync
    assert d.isr_change is not None and tuple(d.isr_change.new_isr) == (1, 2, 3)
    lead.on_follower_fetch(3, 12, 1, 1, 10**6 + 2)
    assert lead.high_watermark == 10, "the pending member counts at once"
    old.append(2, epoch=1)  # the records 10-11 of epoch 1, as fetched
    assert follower.on_fetch_response(d.high_watermark) == 0, "a new leader's lower value is taken"
    d = lead.on_follower_fetch(2, 12, 1, follower.last_fetched_epoch, 10**6 + 3)
    assert lead.high_watermark == 12
    follower.on_fetch_response(lead.high_watermark)
    assert follower.high_watermark == 12
