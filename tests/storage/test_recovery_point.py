"""Recovery points after a crash, as Kafka's LogLoader.recoverLog (storage/.../log/LogLoader.java)
and LogManager.checkpointLogRecoveryOffsets: only the segments from the checkpointed recovery point on
(`recovery-point-offset-checkpoint`) are recovered, torn tails are cut, what a recovery keeps is
fsynced before it counts as durable, and the checkpoint never vouches for more than is durable."""
import asyncio
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.records import build_batch
from kcoord.storage import LogManager
from kcoord.storage.checkpoint import read_checkpoint
from kcoord.storage.manager import RECOVERY_POINT_CHECKPOINT
from tests.storage.recovery_helpers import (
    CONFIG,
    KEEP,
    FailingFsyncOf,
    RecordingFS,
    crash,
    everything,
    facts,
    fully_recovered,
    put,
    write_and_close,
)


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
