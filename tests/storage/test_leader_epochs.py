"""Leader epochs per partition: Kafka's LeaderEpochFileCache (storage/src/main/java/org/apache/kafka/storage/
internals/epoch/LeaderEpochFileCache.java: assign, truncateFromEnd, truncateFromStart, endOffsetFor) kept in the
partition's leader-epoch-checkpoint, and the epoch the log stamps on its batches."""
from __future__ import annotations

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
    cache = cache_with(tmp_path, [(0, 0), (0, 5), (2, 8), (1, 9), (5, 20)])
    assert cache.entries == [(0, 0), (2, 8), (5, 20)]  # only new, higher epochs
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
