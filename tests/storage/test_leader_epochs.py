"""Leader epochs per partition: Kafka's LeaderEpochFileCache (storage/src/main/java/org/apache/kafka/storage/
internals/epoch/LeaderEpochFileCache.java: assign, truncateFromEnd, truncateFromStart, endOffsetFor) kept in the
partition's leader-epoch-checkpoint, and the epoch the log stamps on its batches."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.records import iter_batches
from kcoord.storage import LogConfig, PartitionLog
from kcoord.storage.fs import FS
from kcoord.storage.leader_epochs import LeaderEpochCache
from tests.storage.storage_helpers import batch


def cache_with(tmp_path, entries) -> LeaderEpochCache:
    cache = LeaderEpochCache(FS(), str(tmp_path))
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_end_offset_for_as_kafka(tmp_path):
    cache = cache_with(tmp_path, [(1, 0), (3, 10), (4, 25)])
    assert cache.end_offset_for(4, 30) == (4, 30)     # the latest epoch ends at the log end
    assert cache.end_offset_for(3, 30) == (3, 25)     # an earlier one where the next begins
    assert cache.end_offset_for(2, 30) == (1, 10)     # unknown in between: the largest epoch below it
    assert cache.end_offset_for(0, 30) == (0, 0)      # older than every entry: where the first begins
    assert cache.end_offset_for(5, 30) == (-1, -1)    # newer than any: undefined
    assert cache.end_offset_for(-1, 30) == (-1, -1)
    assert cache_with(tmp_path / "x", []).end_offset_for(0, 5) == (-1, -1)


def test_assign_truncate_and_the_checkpoint_file(tmp_path):
    cache = cache_with(tmp_path, [(0, 0), (0, 5), (2, 8), (5, 20)])
    assert cache.entries == [(0, 0), (2, 8), (5, 20)]  # the same epoch from a higher offset changes nothing
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 8\n5 20\n"
    cache.truncate_from_end(20)
    assert cache.entries == [(0, 0), (2, 8)]
    cache.truncate_from_start(10)
    assert cache.entries == [(2, 10)]
    assert LeaderEpochCache(FS(), str(tmp_path)).entries == [(2, 10)]
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n")  # torn by a crash
    assert not LeaderEpochCache(FS(), str(tmp_path)).loaded


def test_log_stamps_its_epoch_and_leads_at_a_new_one_after_reopening(tmp_path):
    def open_log():
        return PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig())

    log = open_log()
    assert log.leader_epoch == 0
    log.append(batch(2))
    log.append(batch(1))
    log.close()
    again = open_log()
    assert again.leader_epoch == 1
    assert again.end_offset_for_epoch(0) == (0, 3)
    again.append(batch(2))
    assert [h.partition_leader_epoch for _, h, _ in iter_batches(again.read(0, 1 << 20))] == [0, 0, 1]
    assert again.leader_epochs.entries == [(0, 0), (1, 3)]
    assert again.end_offset_for_epoch(0) == (0, 3) and again.end_offset_for_epoch(1) == (1, 5)
    again.truncate_to(3)  # epoch 1's batches cut away: its entry goes, the next append assigns it again
    assert again.leader_epochs.entries == [(0, 0)]
    again.append(batch(1))
    assert again.leader_epochs.entries == [(0, 0), (1, 3)]
    again.close()


def test_a_log_without_a_checkpoint_rebuilds_it_from_the_batches(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig())
    log.append(batch(2))
    log.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    again = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig())
    assert again.leader_epoch == 1 and again.leader_epochs.entries == [(0, 0)]
    again.close()


# -- LeaderEpochFileCache.assign's full rule (Kafka's LeaderEpochFileCacheTest scenarios, restated) --------


class RecordingFS(FS):
    def __init__(self) -> None:
        self.fsyncs = 0
        self.dir_fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)

    def fsync_dir(self, path: str) -> None:
        self.dir_fsyncs += 1
        super().fsync_dir(path)


@pytest.mark.parametrize(("assigned", "expected"), [
    # the same epoch again from a higher offset: the first start stays
    ([(2, 9), (2, 10)], [(2, 9)]),
    # a new epoch at the same offset as the latest: the latest never held a record and goes
    ([(2, 9), (3, 9)], [(3, 9)]),
    # the same epoch from a lower offset: it starts there, and whatever began at or after it goes
    ([(5, 11), (6, 12), (7, 13), (7, 12)], [(5, 11), (7, 12)]),
    # an epoch below the latest: every entry at or above it goes (monotonic epochs kept)
    ([(1, 5), (2, 6), (1, 7)], [(1, 7)]),
    # a higher epoch from a lower offset: entries starting at or after it go
    ([(2, 6), (3, 5)], [(3, 5)]),
    # an older epoch from a later offset than every entry: the later epochs are cut, not it
    ([(0, 0), (2, 8), (5, 20), (1, 30)], [(0, 0), (1, 30)]),
    # epochs need not start at 0, nor follow each other
    ([(4, 0), (9, 3), (12, 40)], [(4, 0), (9, 3), (12, 40)]),
])
def test_assign_follows_kafkas_rule(tmp_path, assigned, expected):
    cache = cache_with(tmp_path, assigned)
    assert cache.entries == expected
    assert LeaderEpochCache(FS(), str(tmp_path)).entries == expected  # on disk as in memory


def test_assign_end_offsets_after_a_conflicting_entry(tmp_path):
    cache = cache_with(tmp_path, [(5, 11), (6, 12), (7, 13), (7, 12)])
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)  # epoch 6 is gone: the largest below it, ending where 7 starts
    (tmp_path / "b").mkdir()
    cache = cache_with(tmp_path / "b", [(1, 5), (2, 6), (1, 7)])
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == (-1, -1)


def test_assign_refuses_negative_entries(tmp_path):
    cache = cache_with(tmp_path, [(1, 0)])
    for bad in [(-1, 5), (2, -1)]:
        with pytest.raises(ValueError):
            cache.assign(*bad)
    assert cache.entries == [(1, 0)]


def test_assign_fsyncs_the_checkpoint_truncations_do_not(tmp_path):
    """Kafka: assign's writeToFile goes through CheckpointFile.write (fsync, atomic move, directory
    fsync); truncateFromEnd/StartAsyncFlush leave the flush to a background task."""
    fs = RecordingFS()
    cache = LeaderEpochCache(fs, str(tmp_path))
    assert cache.assign(1, 0) and (fs.fsyncs, fs.dir_fsyncs) == (1, 1)
    assert not cache.assign(1, 5) and (fs.fsyncs, fs.dir_fsyncs) == (1, 1)  # unchanged: not rewritten
    cache.assign(2, 10)
    cache.truncate_from_end(10)
    cache.truncate_from_start(3)
    assert (fs.fsyncs, fs.dir_fsyncs) == (2, 2)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n1 3\n"


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 40)), max_size=25))
def test_assign_keeps_epochs_and_offsets_strictly_increasing(tmp_path_factory, assigned):
    cache = LeaderEpochCache(FS(), str(tmp_path_factory.mktemp("epochs")))
    for epoch, start in assigned:
        before = list(cache.entries)
        changed = cache.assign(epoch, start)
        entries = cache.entries
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:], strict=False))
        if changed:  # what stays is a prefix of what was, below the new entry, which is the latest
            assert entries[-1] == (epoch, start) and entries[:-1] == before[:len(entries) - 1]
        else:  # only the latest epoch seen again from its start or later
            assert entries == before and before[-1][0] == epoch and before[-1][1] <= start
