"""Clean shutdown marker and recovery points, as Kafka's LogManager.loadLogs / shutdown and
LogLoader.recoverLog (storage/.../log/LogLoader.java) behave: after a clean close the next open
scans no segment and trusts the index files (sanity-checked); the marker is deleted when the log
manager starts, so a crash after a clean start recovers; after a crash only the segments from the
checkpointed recovery point on (`recovery-point-offset-checkpoint`) are recovered."""
import asyncio
import errno
import os
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import segment_facts

from protocol.records import build_batch, decode_records, iter_batches
from storage import FS, LogConfig, LogManager, PartitionLog, StorageError
from storage.checkpoint import read_checkpoint
from storage.manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT
from storage.segment import SegmentFiles

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=60)
ONE_SEGMENT = CONFIG.replace(segment_bytes=5000)  # rolled by hand
KEEP = CONFIG.replace(retention_ms=-1)  # maintenance passes must not delete the test's old segments


def put(log: PartitionLog, i: int, ts: int | None = None) -> int:
    value = b"value-%d-" % i + b"x" * (i % 37)
    return log.append(build_batch([(b"k%d" % (i % 7), value, (), 1_000 + i if ts is None else ts)])).base_offset


def everything(log: PartitionLog) -> list[tuple[int, bytes, bytes, int]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        for _, header, batch in iter_batches(log.read(offset, 1 << 20), verify=True):
            out += [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(batch)]
            offset = header.next_offset
    return out


def facts(log: PartitionLog) -> list[tuple]:
    return [segment_facts(s) + (s.index.bytes_since_last_entry,) for s in log.segments]


def crash(mgr: LogManager) -> None:
    """Leave as a SIGKILL would: descriptors dropped, nothing flushed, sealed or checkpointed."""
    for partition_log in mgr.logs():
        for s in partition_log.segments:
            SegmentFiles(partition_log.fs, [s.fd, s.index_fd, s.timeindex_fd]).close()
    mgr.fsync_executor.shutdown(wait=True)
    mgr.cleaner_executor.shutdown(wait=True)


def fully_recovered(path: str, config: LogConfig = CONFIG) -> PartitionLog:
    """The same partition recovered from scratch, from a copy (every segment CRC-checked)."""
    copy = path + "-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(path, copy)
    log = PartitionLog(os.path.join(copy, "t-0"), "t", 0, config)
    assert log.loaded_recovered == len(log.segments) and log.loaded_trusted == 0
    return log


async def write_and_close(path: str, n: int, config: LogConfig = CONFIG) -> None:
    mgr = LogManager(path, config)
    log = mgr.get_or_create("t", 0)
    for i in range(n):
        put(log, i)
    await mgr.close()


async def test_clean_close_writes_the_marker_and_the_next_start_deletes_it(tmp_path):
    path = str(tmp_path / "d")
    await write_and_close(path, 40)
    marker = os.path.join(path, CLEAN_SHUTDOWN_FILE)
    assert open(marker, "rb").read() == b'{"version":0,"brokerEpoch":-1}'  # CleanShutdownFileHandler's
    mgr = LogManager(path, CONFIG)
    log = mgr.get("t", 0)
    assert mgr.had_clean_shutdown and not os.path.exists(marker)
    assert len(log.segments) > 3 and log.loaded_recovered == 0 and log.loaded_trusted == len(log.segments)
    reference = fully_recovered(path)
    assert facts(log) == facts(reference) and everything(log) == everything(reference)
    assert log.recovery_point == log.log_end_offset == 40
    reference.close()
    crash(mgr)
    again = LogManager(path, CONFIG)  # the marker went at start: this start is unclean
    assert not again.had_clean_shutdown and again.get("t", 0).loaded_recovered >= 1
    await again.close()


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(min_value=1, max_value=3), st.integers(min_value=-300, max_value=400),
              st.integers(min_value=0, max_value=40)),
    st.tuples(st.just("roll"), st.none(), st.none(), st.none()),
    st.tuples(st.just("compact"), st.none(), st.none(), st.none())), max_size=50),
    interval=st.sampled_from([0, 1, 60, 300, 4096]), segment_bytes=st.sampled_from([300, 700, 5000]),
    compact=st.booleans())
def test_a_clean_open_knows_what_a_full_recovery_finds(tmp_path_factory, ops, interval, segment_bytes, compact):
    """Property: whatever was appended, rolled and compacted, the open after a clean close (no
    segment scanned) holds exactly the state a full recovery rebuilds — sizes, offsets, max
    timestamps, both indexes in memory and on disk — serves the same records and goes on alike."""
    root = str(tmp_path_factory.mktemp("clean"))
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval,
                       cleanup_policy="compact" if compact else "delete")
    mgr = LogManager(root, config)
    log = mgr.get_or_create("t", 0)
    ts, n = 10_000, 0
    for op, count, dip, size in ops:
        if op == "append":
            ts += 50
            records = [(b"k%d" % (n % 3), b"v" * size, (), max(0, ts + dip + j)) for j in range(count)]
            n += 1
            log.append(build_batch(records))
        elif op == "roll":
            log.roll()
        elif compact:
            log.flush()
            if log.cleanable_segments():
                log.compact(now_ms=ts)
    asyncio.run(mgr.close())
    clean = LogManager(root, config)
    opened = clean.get("t", 0)
    assert clean.had_clean_shutdown and opened.loaded_recovered == 0
    reference = fully_recovered(root, config)
    assert facts(opened) == facts(reference)
    assert everything(opened) == everything(reference)
    assert opened.offset_for_timestamp(-3) == reference.offset_for_timestamp(-3)
    for partition_log in (opened, reference):
        put(partition_log, 1, ts=ts + 500)
        partition_log.roll()
        put(partition_log, 2, ts=ts + 400)
    assert facts(opened) == facts(reference)
    reference.close()
    asyncio.run(clean.close())


async def test_a_crash_after_a_clean_start_recovers_from_the_recovery_point(tmp_path):
    path = str(tmp_path / "d")
    await write_and_close(path, 40)
    mgr = LogManager(path, CONFIG)  # clean start: the marker is gone, the recovery points written
    assert read_checkpoint(mgr.fs, os.path.join(path, RECOVERY_POINT_CHECKPOINT)) == {("t", 0): 40}
    log = mgr.get("t", 0)
    for i in range(40, 70):
        put(log, i)
    await log.sync()
    put(log, 70)  # not fsynced: may or may not survive
    bases = [s.base_offset for s in log.segments]
    crash(mgr)
    again = LogManager(path, CONFIG)
    log = again.get("t", 0)
    assert not again.had_clean_shutdown
    # Kafka's recoverLog: the segment holding the checkpointed point (40) and every later one.
    holding = max(b for b in bases if b <= 40)
    assert log.loaded_trusted == len([b for b in bases if b < holding])
    assert log.loaded_recovered == len([b for b in bases if b >= holding]) > 1
    assert [o for o, *_ in everything(log)][:70] == list(range(70))
    reference = fully_recovered(path)
    assert facts(log) == facts(reference)
    reference.close()
    await again.close()


async def test_a_torn_tail_after_a_crash_is_cut(tmp_path):
    path = str(tmp_path / "d")
    await write_and_close(path, 10)
    mgr = LogManager(path, CONFIG)
    log = mgr.get("t", 0)
    acked = [put(log, i) for i in range(10, 20)]
    await log.sync()
    active = log.active_segment.log_path
    end = os.path.getsize(active)
    put(log, 20)
    crash(mgr)
    with open(active, "r+b") as f:  # the last write reached the disk only in part
        f.truncate(end + 30)
    again = LogManager(path, CONFIG)
    log = again.get("t", 0)
    assert log.log_end_offset == acked[-1] + 1 == 20
    assert os.path.getsize(active) == end
    assert [o for o, *_ in everything(log)] == list(range(20))
    assert put(log, 21) == 20
    await again.close()


def _cut_index(segment, path):
    os.truncate(segment.index_path, os.path.getsize(segment.index_path) - 3)


def _empty_index(segment, path):
    os.truncate(segment.index_path, 0)


def _drop_index(segment, path):
    os.remove(segment.index_path)


def _drop_last_time_entry(segment, path):
    os.truncate(segment.timeindex_path, os.path.getsize(segment.timeindex_path) - 12)


def _index_past_the_end(segment, path):
    with open(segment.index_path, "r+b") as f:
        f.seek(-4, 2)
        f.write((10**6).to_bytes(4, "big"))


def _garbage_after_the_log(segment, path):
    with open(segment.log_path, "ab") as f:
        f.write(b"\x00" * 20 + b"\x17" * 50)


def _torn_log(segment, path):
    os.truncate(segment.log_path, segment.size - 5)


def _torn_extra_batch(segment, path):
    with open(segment.log_path, "ab") as f:  # an older batch, cut: only the file's size tells
        f.write(build_batch([(b"late", b"y" * 30, (), 1)], base_offset=segment.next_offset)[:40])


def _flipped_tail_byte(segment, path):
    with open(segment.log_path, "r+b") as f:
        f.seek(-2, 2)
        byte = f.read(1)
        f.seek(-2, 2)
        f.write(bytes([byte[0] ^ 0x40]))


@pytest.mark.parametrize("damage", [_cut_index, _empty_index, _drop_index, _drop_last_time_entry,
                                    _index_past_the_end, _garbage_after_the_log, _torn_log, _torn_extra_batch,
                                    _flipped_tail_byte])
async def test_a_segment_failing_its_sanity_check_is_recovered(tmp_path, damage):
    """With the marker present, a segment whose files disagree is recovered, not trusted (Kafka's
    LogLoader.loadSegmentFiles: CorruptIndexException / NoSuchFileException -> recoverSegment)."""
    path = str(tmp_path / "d")
    mgr = LogManager(path, ONE_SEGMENT)
    log = mgr.get_or_create("t", 0)
    for i in range(12):
        put(log, i)
    log.roll()
    for i in range(12, 24):
        put(log, i, ts=5_000 + i)  # the last batch holds the segment's max timestamp
    damaged = log.active_segment
    assert len(damaged.index) >= 2 and damaged.size > 300
    await mgr.close()
    damage(damaged, path)
    reference = fully_recovered(path, ONE_SEGMENT)
    again = LogManager(path, ONE_SEGMENT)
    log = again.get("t", 0)
    assert again.had_clean_shutdown
    assert (log.loaded_trusted, log.loaded_recovered) == (len(log.segments) - 1, 1)
    assert facts(log) == facts(reference)
    assert everything(log) == everything(reference)
    reference.close()
    await again.close()


async def test_recovery_point_checkpoint_has_kafkas_format(tmp_path):
    mgr = LogManager(str(tmp_path), CONFIG)
    put(mgr.get_or_create("t", 0), 0)
    mgr.get_or_create("my topic", 3)
    await mgr.close()
    text = open(tmp_path / RECOVERY_POINT_CHECKPOINT).read()
    assert text == "0\n2\nmy topic 3 0\nt 0 1\n"  # version, count, "topic partition offset" lines


async def test_maintenance_checkpoints_moved_recovery_points(tmp_path):
    mgr = LogManager(str(tmp_path), KEEP)
    log = mgr.get_or_create("t", 0)
    path = os.path.join(str(tmp_path), RECOVERY_POINT_CHECKPOINT)
    for i in range(30):
        put(log, i)
    await mgr.maintain_once()
    assert read_checkpoint(mgr.fs, path) == {("t", 0): 0}  # appended, not yet durable
    await log.sync()
    await mgr.maintain_once()
    assert read_checkpoint(mgr.fs, path) == {("t", 0): 30}
    # What a recovery would then trust is durable and sealed: every inactive segment's indexes.
    assert all(not s.indexes_dirty for s in log.segments[:-1])
    assert all(s.time_index.timestamps[-1] == s.max_timestamp for s in log.segments[:-1])
    await mgr.close()


async def test_truncation_and_topic_deletion_rewrite_the_checkpoint(tmp_path):
    mgr = LogManager(str(tmp_path), KEEP)
    path = os.path.join(str(tmp_path), RECOVERY_POINT_CHECKPOINT)
    log = mgr.get_or_create("t", 0)
    for i in range(30):
        put(log, i)
    await log.sync()
    await mgr.get_or_create("gone", 0).append_durable(build_batch([(None, b"x")]))
    await mgr.maintain_once()
    assert read_checkpoint(mgr.fs, path) == {("t", 0): 30, ("gone", 0): 1}
    # A point checkpointed above a cut would vouch for whatever is appended there next.
    log.truncate_to(12)
    assert read_checkpoint(mgr.fs, path) == {("t", 0): 12, ("gone", 0): 1}
    mgr.delete_topic("gone")
    assert read_checkpoint(mgr.fs, path) == {("t", 0): 12}
    await mgr.close()


class FailingFsyncOf(FS):
    def __init__(self) -> None:
        self.failing: set[int] = set()
        self.failing_dirs = False

    def fsync(self, fd: int) -> None:
        if fd in self.failing:
            raise OSError(errno.EIO, "injected: fsync failed")
        super().fsync(fd)

    def fsync_dir(self, path: str) -> None:
        if self.failing_dirs:
            raise OSError(errno.EIO, "injected: directory fsync failed")
        super().fsync_dir(path)


async def test_a_close_that_fails_leaves_no_marker(tmp_path):
    fs = FailingFsyncOf()
    mgr = LogManager(str(tmp_path), CONFIG, fs=fs)
    log = mgr.get_or_create("t", 0)
    put(log, 0)
    fs.failing.add(log.active_segment.fd)
    with pytest.raises(StorageError):
        await mgr.close()
    assert not os.path.exists(os.path.join(str(tmp_path), CLEAN_SHUTDOWN_FILE))
    again = LogManager(str(tmp_path), CONFIG)
    assert not again.had_clean_shutdown and again.get("t", 0).loaded_recovered == 1
    await again.close()


class RecordingFS(FS):
    def __init__(self) -> None:
        self.synced: set[str] = set()

    def fsync(self, fd: int) -> None:
        self.synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        super().fsync(fd)


async def test_every_segment_a_recovery_keeps_is_fsynced_before_it_counts_as_durable(tmp_path):
    path = str(tmp_path / "d")
    mgr = LogManager(path, CONFIG)
    log = mgr.get_or_create("t", 0)
    for i in range(30):  # several segments, none fsynced: a kill leaves them in the page cache only
        put(log, i)
    crash(mgr)
    fs = RecordingFS()
    again = LogManager(path, CONFIG, fs=fs)
    log = again.get("t", 0)
    assert log.loaded_recovered == len(log.segments) > 3
    assert log.recovery_point == log.log_end_offset == 30
    assert {s.log_path for s in log.segments} <= fs.synced
    await again.close()


@settings(max_examples=25, deadline=None)
@given(durable=st.integers(min_value=0, max_value=12), unflushed=st.integers(min_value=1, max_value=12),
       data=st.data())
def test_a_crash_after_a_clean_start_cuts_a_tail_torn_anywhere(tmp_path_factory, durable, unflushed, data):
    """Property: clean close, clean start (marker deleted), fsynced appends, then appends cut off by a
    crash at any byte of what was not fsynced: the next open is unclean, keeps every fsynced record,
    cuts the torn bytes back to a batch boundary, serves only whole CRC-valid batches and appends on."""
    path = str(tmp_path_factory.mktemp("torn"))
    asyncio.run(write_and_close(path, 15))
    mgr = LogManager(path, CONFIG)
    log = mgr.get("t", 0)
    for i in range(15, 15 + durable):
        put(log, i)
    asyncio.run(log.sync())
    synced_end = log.log_end_offset
    for i in range(synced_end, synced_end + unflushed):
        put(log, i)
    active, synced_size = log.active_segment, 0
    if active.base_offset < synced_end:
        found = active.find_position(synced_end)
        synced_size = active.size if found is None else found[0]
    crash(mgr)
    # The crash cut the last segment's unflushed bytes short anywhere.
    os.truncate(active.log_path, data.draw(st.integers(min_value=synced_size,
                                                       max_value=os.path.getsize(active.log_path))))
    again = LogManager(path, CONFIG)
    log = again.get("t", 0)
    assert not again.had_clean_shutdown
    assert synced_end <= log.log_end_offset <= synced_end + unflushed
    assert [o for o, *_ in everything(log)] == list(range(log.log_end_offset))  # CRC-verified, no gap
    assert os.path.getsize(log.active_segment.log_path) == log.active_segment.size
    assert put(log, 99) == log.log_end_offset - 1
    asyncio.run(again.close())


async def test_a_checkpoint_that_cannot_be_written_is_removed(tmp_path):
    """Its points could be above a truncation made since: with none, a crash recovers every segment."""
    fs = FailingFsyncOf()
    mgr = LogManager(str(tmp_path), KEEP, fs=fs)
    log = mgr.get_or_create("t", 0)
    for i in range(30):
        put(log, i)
    await log.sync()
    await mgr.maintain_once()
    path = os.path.join(str(tmp_path), RECOVERY_POINT_CHECKPOINT)
    assert read_checkpoint(fs, path) == {("t", 0): 30}
    fs.failing_dirs = True
    log.truncate_to(10)
    assert not os.path.exists(path)
    crash(mgr)
    again = LogManager(str(tmp_path), KEEP)
    assert again.get("t", 0).loaded_trusted == 0
    await again.close()


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.sampled_from(["append", "append", "append", "big", "roll", "sync", "maintain", "checkpoint",
                                     "compact"]), max_size=80),
       compact=st.booleans())
def test_after_a_crash_the_segments_below_the_recovery_point_are_opened_as_a_recovery_finds_them(
        tmp_path_factory, ops, compact):
    """Property: whatever ran (appends, rolls, fsyncs, checkpoints, compaction) before a kill, the
    segments opened from their indexes because they lie below the checkpointed recovery point hold
    the state a full recovery rebuilds, and the log serves the same records."""
    root = str(tmp_path_factory.mktemp("rp"))
    config = KEEP.replace(cleanup_policy="compact" if compact else "delete", min_cleanable_dirty_ratio=0.01)
    mgr = LogManager(root, config)
    log = mgr.get_or_create("t", 0)
    n = 0
    for op in ops:
        if op in ("append", "big"):
            put(log, n) if op == "append" else log.append(build_batch([(b"k%d" % (n % 3), b"z" * 300, (), 2_000 + n)]))
            n += 1
        elif op == "roll":
            log.roll()
        elif op == "sync":
            log.flush()
        elif op in ("maintain", "checkpoint"):
            if op == "checkpoint":
                log.flush()
            asyncio.run(mgr.maintain_once(now_ms=10**6))
        elif compact and log.cleanable_segments():
            log.compact(now_ms=10**6)
    crash(mgr)
    reference = fully_recovered(root, config)
    again = LogManager(root, config)
    opened = again.get("t", 0)
    assert opened.loaded_trusted + opened.loaded_recovered == len(opened.segments)
    assert facts(opened) == facts(reference)
    assert everything(opened) == everything(reference)
    reference.close()
    asyncio.run(again.close())
