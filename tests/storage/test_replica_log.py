"""The log as a replica: become_leader (Kafka's UnifiedLog.maybeAssignEpochStartOffset, called by
Partition.makeLeader), append_as_follower (UnifiedLog.appendAsFollower), truncate_to before a follower
append (UnifiedLog.truncateTo), crash safety of follower appends; and the single-node epoch numbering
that must not change (a node that never calls become_leader)."""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.records import build_batch, iter_batches, set_partition_leader_epoch
from kcoord.storage import (
    CorruptRecordError,
    LogConfig,
    LogManager,
    OffsetsOutOfOrderError,
    PartitionLog,
    StorageError,
    UnexpectedAppendOffsetError,
)
from tests.storage.recovery_helpers import crash
from tests.storage.storage_helpers import batch

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=60)


def open_log(path, name="t-0", config=CONFIG) -> PartitionLog:
    return PartitionLog(str(path / name), "t", 0, config)


def fetch(log: PartitionLog, start: int, end: int | None = None) -> bytes:
    """The batches from `start` up to `end` (a read stops at a segment's end: read on, as fetches do)."""
    end = log.log_end_offset if end is None else end
    out, offset = b"", start
    while offset < end:
        data = log.read(offset, 1 << 20, max_offset=end)
        out += data
        *_, (_, last, _) = iter_batches(data)
        offset = last.next_offset
    return out


def everything(log: PartitionLog) -> bytes:
    return fetch(log, log.log_start_offset)


def epochs_of(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.partition_leader_epoch) for _, h, _ in iter_batches(data)]


def leader_history(path, history) -> PartitionLog:
    """A leader log written as a cluster node writes it: become_leader(epoch), then batches of n records."""
    leader = open_log(path, "leader-0")
    for epoch, sizes in history:
        leader.become_leader(epoch)
        for n in sizes:
            leader.append(batch(n, ts=1_000 + n))
    return leader


def replicated_batch(base_offset: int, n: int, epoch: int, ts: int = 5_000) -> bytes:
    data = bytearray(build_batch([(b"k", b"v%d" % i, (), ts) for i in range(n)], base_offset=base_offset))
    set_partition_leader_epoch(data, epoch)  # outside the CRC, as a leader stamps it
    return bytes(data)


# -- become_leader ---------------------------------------------------------------------------------


def test_become_leader_records_the_epoch_at_the_log_end_at_once(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(replicated_batch(0, 3, 1))
    log.become_leader(4)
    assert log.leader_epochs.entries == [(1, 0), (4, 3)]
    # persisted before any record of epoch 4 exists
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n4 3\n"
    assert log.end_offset_for_epoch(1) == (1, 3)   # epoch 1 ended where this leadership began
    assert log.end_offset_for_epoch(4) == (4, 3)   # the latest epoch ends at the log end
    assert log.end_offset_for_epoch(2) == (1, 3)
    log.append(batch(2))
    assert log.end_offset_for_epoch(4) == (4, 5)
    assert epochs_of(everything(log)) == [(0, 1), (3, 4)]
    log.close()


def test_become_leader_is_idempotent_for_the_same_epoch(tmp_path):
    log = open_log(tmp_path)
    log.become_leader(2)
    log.append(batch(3))
    log.become_leader(2)  # again, e.g. a repeated metadata delta: the epoch still starts at 0
    log.become_leader(2)
    assert log.leader_epochs.entries == [(2, 0)]
    assert log.leader_epoch == 2
    log.append(batch(1))
    assert epochs_of(everything(log)) == [(0, 2), (3, 2)]
    log.close()
    again = open_log(tmp_path)  # the entry survives a reopen
    assert again.leader_epochs.entries == [(2, 0)]
    again.close()


def test_become_leader_refuses_an_older_epoch_and_a_stale_leader_append_is_refused(tmp_path):
    log = open_log(tmp_path)
    log.become_leader(3)
    log.append(batch(1))
    with pytest.raises(StorageError):
        log.become_leader(2)
    with pytest.raises(ValueError):
        log.become_leader(-1)
    # a follower append brings a newer epoch; appending as leader at 3 without become_leader is refused
    log.append_as_follower(replicated_batch(1, 2, 5))
    with pytest.raises(StorageError):
        log.append(batch(1))
    assert log.log_end_offset == 3 and log.leader_epochs.entries == [(3, 0), (5, 1)]
    log.become_leader(6)
    log.append(batch(1))
    assert epochs_of(everything(log))[-1] == (3, 6)
    log.close()


def test_truncate_to_the_log_end_removes_an_epoch_that_never_wrote(tmp_path):
    """Kafka's UnifiedLog.truncateTo cuts the epoch cache at the log end even when no record goes: a
    leader that recorded its epoch and then lost leadership before writing conflicts with its successor."""
    log = open_log(tmp_path)
    log.append_as_follower(replicated_batch(0, 2, 1))
    log.become_leader(2)
    assert log.leader_epochs.entries == [(1, 0), (2, 2)]
    log.truncate_to(2)
    assert log.leader_epochs.entries == [(1, 0)]
    log.append_as_follower(replicated_batch(2, 1, 3))  # the successor's epoch 3 data
    assert log.leader_epochs.entries == [(1, 0), (3, 2)]
    log.close()


# -- append_as_follower --------------------------------------------------------------------------


def test_follower_append_keeps_offsets_epochs_and_timestamps(tmp_path):
    leader = leader_history(tmp_path, [(0, [2, 1]), (3, [4]), (7, [1, 1, 3])])
    data = everything(leader)
    # LogAppendTime on the follower must not rewrite what the leader stamped
    follower = open_log(tmp_path, config=CONFIG.replace(message_timestamp_type="LogAppendTime"))
    info = follower.append_as_follower(data)
    assert (info.base_offset, info.last_offset, info.log_append_time_ms) == (0, 11, -1)
    assert everything(follower) == data
    assert follower.leader_epochs.entries == leader.leader_epochs.entries == [(0, 0), (3, 3), (7, 7)]
    for epoch in range(-1, 9):
        assert follower.end_offset_for_epoch(epoch) == leader.end_offset_for_epoch(epoch)
    leader.close()
    follower.close()


def test_follower_append_refuses_what_does_not_continue_the_log(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(replicated_batch(0, 3, 1))
    before = everything(log)
    with pytest.raises(UnexpectedAppendOffsetError, match="below the log end 3"):
        log.append_as_follower(replicated_batch(2, 2, 1))
    with pytest.raises(OffsetsOutOfOrderError):
        log.append_as_follower(replicated_batch(3, 2, 1) + replicated_batch(4, 1, 1))
    corrupt = bytearray(replicated_batch(3, 1, 1))
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bytes(corrupt))
    with pytest.raises(CorruptRecordError):  # a batch the leader never stamped
        log.append_as_follower(build_batch([(b"k", b"v")], base_offset=3))
    assert everything(log) == before and log.leader_epochs.entries == [(1, 0)]
    # a gap (a compacted leader log has them) is kept as it is
    log.append_as_follower(replicated_batch(7, 1, 2))
    assert log.log_end_offset == 8 and epochs_of(everything(log)) == [(0, 1), (7, 2)]
    log.close()


def test_truncate_then_follow_the_new_leader(tmp_path):
    """A returning replica wrote epoch 2 records the new leader never had; it cuts at the end of epoch 1
    (what OffsetForLeaderEpoch / DivergingEpoch told it) and appends the leader's epoch 3 records."""
    leader = leader_history(tmp_path, [(1, [2, 2]), (3, [1, 2])])
    follower = open_log(tmp_path)
    follower.append_as_follower(fetch(leader, 0, 4))
    follower.become_leader(2)
    follower.append(batch(3))
    follower.append(batch(1))
    assert follower.leader_epochs.entries == [(1, 0), (2, 4)]
    follower.truncate_to(leader.end_offset_for_epoch(1)[1])
    assert follower.log_end_offset == 4 and follower.leader_epochs.entries == [(1, 0)]
    follower.append_as_follower(fetch(leader, 4))
    assert everything(follower) == everything(leader)
    assert follower.leader_epochs.entries == leader.leader_epochs.entries == [(1, 0), (3, 4)]
    leader.close()
    follower.close()


async def test_follower_appends_go_through_group_commit_and_survive_a_crash(tmp_path):
    leader = leader_history(tmp_path, [(2, [1] * 12), (4, [3] * 6)])
    data = everything(leader)
    mgr = LogManager(str(tmp_path / "node"), CONFIG)
    follower = mgr.get_or_create("t", 0)
    chunks = [h.base_offset for _, h, _ in iter_batches(data)][::4] + [leader.log_end_offset]
    rounds = follower.fsync_rounds
    infos = [follower.append_as_follower(fetch(leader, a, b)) for a, b in zip(chunks, chunks[1:], strict=False)]
    await follower.sync(infos[-1])  # acknowledged: the offsets the follower reports to its leader
    assert follower.fsync_rounds == rounds + 1  # one fsync for every append made before it
    assert follower.recovery_point == leader.log_end_offset
    assert len(follower.segments) > 1
    crash(mgr)  # as SIGKILL: no flush, no checkpoint, no clean-shutdown marker
    again = LogManager(str(tmp_path / "node"), CONFIG)
    assert not again.had_clean_shutdown
    recovered = again.get("t", 0)
    assert everything(recovered) == data
    assert recovered.leader_epochs.entries == [(2, 0), (4, 12)]
    leader.close()
    await again.close()


@settings(max_examples=25, deadline=None)
@given(history=st.lists(st.lists(st.integers(1, 4), min_size=0, max_size=5), min_size=1, max_size=5),
       epoch_steps=st.lists(st.integers(1, 3), min_size=5, max_size=5),
       cuts=st.lists(st.integers(1, 5), min_size=1, max_size=8))
def test_any_leader_history_fetched_in_any_chunks_is_replicated_exactly(tmp_path_factory, history, epoch_steps,
                                                                       cuts):
    """Leaders at growing epochs (some writing nothing), fetched batch-aligned in arbitrary chunks: the
    follower holds the same bytes and answers OffsetForLeaderEpoch as the leader -- except for an epoch
    a leader recorded without writing, which a follower only learns from batches."""
    tmp = tmp_path_factory.mktemp("replicate")
    epochs = [sum(epoch_steps[:i + 1]) for i in range(len(history))]
    leader = leader_history(tmp, list(zip(epochs, history, strict=True)))
    follower = open_log(tmp)
    bases = [h.base_offset for _, h, _ in iter_batches(everything(leader))] if leader.log_end_offset else []
    position, i = 0, 0
    while position < len(bases):
        stop = min(position + cuts[i % len(cuts)], len(bases))
        end = bases[stop] if stop < len(bases) else leader.log_end_offset
        follower.append_as_follower(fetch(leader, bases[position], end))
        position, i = stop, i + 1
    assert follower.log_end_offset == leader.log_end_offset
    if leader.log_end_offset:
        assert everything(follower) == everything(leader)
    # a later leader's assign at the same start removed an earlier one that wrote nothing
    assert follower.leader_epochs.entries == [(e, s) for e, s in leader.leader_epochs.entries
                                              if s < leader.log_end_offset]
    leader.close()
    follower.close()


# -- single node: the numbering pinned ------------------------------------------------------------


async def test_single_node_epochs_across_restarts_are_unchanged(tmp_path):
    """Without become_leader: epoch 0 on a new log; each open leads one above the latest epoch the log
    holds, recorded only by the first append (opening and closing without appending keeps the number);
    a crash counts as any restart."""
    path = str(tmp_path / "d")

    async def session(appends: int, clean: bool = True) -> int:
        mgr = LogManager(path, CONFIG)
        log = mgr.get_or_create("t", 0)
        epoch = log.leader_epoch
        for _ in range(appends):
            await log.append_durable(batch(1))
        if clean:
            await mgr.close()
        else:
            crash(mgr)
        return epoch

    assert [await session(n, clean) for n, clean in
            [(2, True), (0, True), (0, True), (1, True), (1, False), (0, False), (2, True)]] == [0, 1, 1, 1, 2, 3, 3]
    mgr = LogManager(path, CONFIG)
    log = mgr.get("t", 0)
    assert epochs_of(everything(log)) == [(0, 0), (1, 0), (2, 1), (3, 2), (4, 3), (5, 3)]
    assert (open(os.path.join(path, "t-0", "leader-epoch-checkpoint")).read()
            == "0\n4\n0 0\n1 2\n2 3\n3 4\n")
    await mgr.close()
