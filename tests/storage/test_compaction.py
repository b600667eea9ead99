"""Compaction: latest record per key, tombstones until their delete horizon, active segment
untouched, offsets kept, crash mid-clean harmless, appends and reads go on during a clean."""
import asyncio
import os
import pathlib
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords

from kcoord.coordinator.testing import ManualClock
from kcoord.protocol.records import build_batch, decode_records, iter_batches
from kcoord.storage import FaultyFS, LogConfig, PartitionLog, StorageError, cleaner
from tests.storage.storage_helpers import segment_facts

DAY = 24 * 3600 * 1000


def open_log(tmp_path, clock=None, **config):
    config = {"cleanup_policy": "compact", "segment_bytes": 400, **config}
    return PartitionLog(str(tmp_path / "c-0"), "c", 0, LogConfig(**config), clock=(clock or ManualClock()).now_ms)


def put(log, key: bytes, value: bytes | None, ts: int = 1000) -> int:
    return log.append(build_batch([(key, value, (), ts)])).base_offset


def records(log) -> list[tuple[int, bytes, bytes | None]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            break
        for _, header, batch in iter_batches(data, verify=True):
            out.extend((r.offset, r.key, r.value) for r in decode_records(batch))
            offset = header.next_offset
    return out


def latest_per_key(rows):
    latest = {}
    for offset, key, value in rows:
        latest[key] = (offset, value)
    return latest


def test_keeps_latest_record_per_key_and_offsets(tmp_path):
    log = open_log(tmp_path)
    for round_no in range(8):
        for k in range(5):
            put(log, b"key%d" % k, b"v%d" % round_no)
    log.roll()
    log.flush()
    before = records(log)
    end = log.log_end_offset
    stats = log.compact(now_ms=0)
    after = records(log)
    assert stats.records_removed == len(before) - 5
    assert sorted(after) == sorted((o, k, v) for k, (o, v) in latest_per_key(before).items())
    assert log.log_end_offset == end
    assert put(log, b"key0", b"new") == end
    log.close()
    assert records(open_log(tmp_path))[:-1] == after


def test_active_segment_is_never_compacted(tmp_path):
    log = open_log(tmp_path, segment_bytes=1 << 20)
    for i in range(10):
        put(log, b"same", b"%d" % i)
    log.flush()
    assert log.cleanable_segments() == []
    assert log.compact(now_ms=0).records_removed == 0
    assert len(records(log)) == 10


def test_key_rewritten_in_active_segment_keeps_older_copy_until_it_rolls(tmp_path):
    log = open_log(tmp_path)
    for i in range(6):
        put(log, b"a%d" % i, b"old" + b"." * 50)
    log.roll()
    put(log, b"a0", b"new")
    log.flush()
    log.compact(now_ms=0)
    assert [v for _, k, v in records(log) if k == b"a0"] == [b"old" + b"." * 50, b"new"]


def test_tombstones_survive_until_delete_horizon(tmp_path):
    clock = ManualClock(10 * DAY)
    log = open_log(tmp_path, clock=clock)
    put(log, b"gone", b"value")
    put(log, b"kept", b"value")
    put(log, b"gone", None)
    log.roll()
    log.flush()
    first_clean = 10 * DAY
    log.compact(now_ms=first_clean)
    assert records(log) == [(1, b"kept", b"value"), (2, b"gone", None)]
    tombstone_batch = next(h for _, h, _ in iter_batches(log.read(2, 1000)))
    assert tombstone_batch.delete_horizon_ms == first_clean + DAY
    log.compact(now_ms=first_clean + DAY - 1)
    assert (2, b"gone", None) in records(log)
    log.compact(now_ms=first_clean + DAY)
    assert records(log) == [(1, b"kept", b"value")]


def test_compacted_segments_read_by_kafka_python(tmp_path):
    log = open_log(tmp_path)
    for i in range(20):
        log.append(build_batch([(b"k%d" % (i % 3), b"v%d" % i), (b"t", None)], timestamp_ms=5,
                               compression=i % 5))
    log.roll()
    log.flush()
    log.compact(now_ms=0)
    expected = records(log)
    seen = []
    for segment in log.segments:
        mr = MemoryRecords(open(segment.log_path, "rb").read())
        while mr.has_next():
            b = mr.next_batch()
            assert b.validate_crc()
            seen.extend((r.offset, r.key, r.value) for r in b)
    assert seen == expected


def test_crash_mid_clean_leaves_old_segments_usable(tmp_path):
    log = open_log(tmp_path)
    for i in range(30):
        put(log, b"k%d" % (i % 4), b"v%d" % i)
    log.roll()
    log.flush()
    before = records(log)
    plan = log._begin_clean(0)
    written = cleaner.prepare(plan)  # the worker finished writing `.cleaned` files...
    assert written and all(os.path.exists(r.path) for r in written)
    for segment in log.segments:  # ...and the process died before the swap
        segment.close()
    recovered = open_log(tmp_path)
    assert not [n for n in os.listdir(tmp_path / "c-0") if n.endswith(".cleaned")]
    assert records(recovered) == before
    recovered.compact(now_ms=0)
    assert len(records(recovered)) == 4


def test_dirty_ratio_drives_needs_compaction(tmp_path):
    log = open_log(tmp_path, min_cleanable_dirty_ratio=0.5)
    for i in range(20):
        put(log, b"k%d" % (i % 2), b"x" * 40)
    log.roll()
    log.flush()
    assert log.dirty_ratio() == 1.0 and log.needs_compaction()
    log.compact(now_ms=0)
    assert log.dirty_ratio() == 0.0 and not log.needs_compaction()


async def test_compact_async_runs_while_appends_and_reads_continue(tmp_path):
    log = open_log(tmp_path, segment_bytes=2000)
    for i in range(300):
        put(log, b"k%d" % (i % 10), b"v%d" % i)
    log.roll()
    log.flush()
    cleaning = asyncio.create_task(log.compact_async(now_ms=0))
    appended = []
    while not cleaning.done():
        appended.append((await log.append_durable(build_batch([(b"live", b"%d" % len(appended))]))).base_offset)
        assert records(log)  # reads keep working
        await asyncio.sleep(0)
    stats = await cleaning
    assert stats.records_removed == 290
    rows = records(log)
    assert [k for _, k, _ in rows].count(b"live") == len(appended)
    assert len([r for r in rows if r[1] != b"live"]) == 10


def test_delete_policy_logs_are_not_compacted(tmp_path):
    log = open_log(tmp_path, cleanup_policy="delete")
    for i in range(20):
        put(log, b"k", b"v%d" % i)
    log.roll()
    log.flush()
    assert not log.needs_compaction()


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_rebuilt_batches_keep_compression_and_batch_span(tmp_path, compression):
    log = open_log(tmp_path, segment_bytes=1 << 20)
    log.append(build_batch([(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")],
                           compression=compression, timestamp_ms=7))
    log.roll()
    log.flush()
    log.compact(now_ms=0)
    (_, header, batch), = iter_batches(log.read(0, 1 << 20))
    assert header.compression == compression
    assert (header.base_offset, header.last_offset) == (0, 3)
    assert [(r.offset, r.key) for r in decode_records(batch)] == [(1, b"b"), (2, b"a"), (3, b"c")]


def replay(rows) -> dict[bytes, bytes]:
    """The state a consumer of the log ends with: last value per key, tombstones delete."""
    state = {}
    for _, key, value in rows:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from([b"a", b"b", b"c", b"d"]), st.none() | st.binary(max_size=30)),
    st.tuples(st.just("roll"), st.none(), st.none())), max_size=60),
    first_clean=st.integers(min_value=0, max_value=3 * DAY))
def test_compaction_preserves_what_a_consumer_replays(tmp_path_factory, ops, first_clean):
    log = open_log(tmp_path_factory.mktemp("prop"), segment_bytes=250)
    for op, key, value in ops:
        if op == "put":
            put(log, key, value)
        else:
            log.roll()
    log.roll()
    log.flush()
    before = records(log)
    end = log.log_end_offset
    log.compact(now_ms=first_clean)
    after_first = records(log)
    log.compact(now_ms=first_clean + DAY)  # every tombstone's horizon has passed now
    after_second = records(log)
    for after in (after_first, after_second):
        assert replay(after) == replay(before)
        assert set(after) <= set(before)
        assert [o for o, _, _ in after] == sorted({o for o, _, _ in after})
        assert log.log_end_offset == end
        assert len({k for _, k, v in after if v is not None}) == len(replay(before))
    assert all(v is not None for _, _, v in after_second)
    # What the cleaner computed for its copies equals what a recovery scan finds in them (both with
    # the time index sealed by its max timestamp, as close does).
    log.close()
    computed = [segment_facts(s) for s in log.segments]
    reopened = open_log(pathlib.Path(log.directory).parent, segment_bytes=250)
    assert [segment_facts(s) for s in reopened.segments] == computed
    reopened.close()


def _compactable(tmp_path, fs):
    log = PartitionLog(str(tmp_path / "f-0"), "f", 0, LogConfig(cleanup_policy="compact", segment_bytes=400),
                       fs=fs)
    for i in range(30):
        put(log, b"k%d" % (i % 3), b"v%d" % i)
    log.roll()
    log.flush()
    return log


def _leftovers(log):
    return [n for n in os.listdir(log.directory) if n.endswith(".cleaned")]


def test_failed_clean_reports_storage_error_and_leaves_log_intact(tmp_path):
    fs = FaultyFS()
    log = _compactable(tmp_path, fs)
    before = records(log)
    fs.fail_next_write()
    with pytest.raises(StorageError):
        log.compact(now_ms=0)
    assert records(log) == before and _leftovers(log) == []
    assert log.compact(now_ms=0).records_removed == len(before) - 3


@pytest.mark.timeout(30)
async def test_cancelled_clean_waits_for_its_worker_then_cleans_up(tmp_path):
    fs = FaultyFS()
    log = _compactable(tmp_path, fs)
    before = records(log)
    fs.fsync_gate = threading.Event()  # the worker will block fsyncing its first `.cleaned` file
    task = asyncio.create_task(log.compact_async(now_ms=0))
    while not _leftovers(log):
        await asyncio.sleep(0.005)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # still waiting for the worker, which holds segment fds
    fs.fsync_gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _leftovers(log) == [] and records(log) == before
    assert (await log.compact_async(now_ms=0)).records_removed == len(before) - 3


def test_last_batch_of_each_idempotent_producer_survives_emptied(tmp_path):
    log = open_log(tmp_path)
    for seq in range(4):  # producer 7: four batches, every record later superseded
        log.append(build_batch([(b"k", b"p7-%d" % seq)], producer_id=7, producer_epoch=2, base_sequence=seq,
                               timestamp_ms=1))
    log.append(build_batch([(b"j", b"p9")], producer_id=9, producer_epoch=0, base_sequence=0, timestamp_ms=1))
    log.append(build_batch([(b"k", b"final"), (b"j", b"final")], timestamp_ms=1))
    log.roll()
    log.flush()
    log.compact(now_ms=0)
    headers = [h for _, h, _ in iter_batches(log.read(0, 1 << 20))]
    shells = [(h.producer_id, h.producer_epoch, h.base_sequence, h.base_offset, h.last_offset, h.records_count)
              for h in headers if h.producer_id >= 0]
    assert shells == [(7, 2, 3, 3, 3, 0), (9, 0, 0, 4, 4, 0)]
    assert records(log) == [(5, b"k", b"final"), (6, b"j", b"final")]
    mr = MemoryRecords(log.read(0, 1 << 20))
    while mr.has_next():
        assert mr.next_batch().validate_crc()
    assert log.compact(now_ms=0).records_removed == 0  # the shells are stable


@pytest.mark.timeout(30)
async def test_truncation_during_a_clean_voids_it(tmp_path):
    fs = FaultyFS()
    log = _compactable(tmp_path, fs)
    cut = log.segments[1].base_offset + 1  # inside a planned segment
    fs.fsync_gate = threading.Event()
    task = asyncio.create_task(log.compact_async(now_ms=0))
    while not _leftovers(log):
        await asyncio.sleep(0.005)
    log.truncate_to(cut)
    fs.fsync_gate.set()
    stats = await task
    assert stats.segments == 0 and _leftovers(log) == []
    assert [o for o, _, _ in records(log)] == list(range(log.log_end_offset))
    assert log.log_end_offset <= cut
