"""Clean shutdown marker, as Kafka's LogManager.loadLogs / shutdown and LogLoader.recoverLog
(storage/.../log/LogLoader.java) behave: after a clean close the next open scans no segment and
trusts the index files (sanity-checked; a segment failing a check is recovered); the marker is
deleted when the log manager starts, so a crash after a clean start recovers; a close that failed
leaves no marker."""
import asyncio
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.records import build_batch
from kcoord.storage import LogConfig, LogManager, StorageError
from kcoord.storage.manager import CLEAN_SHUTDOWN_FILE
from tests.storage.recovery_helpers import (
    CONFIG,
    ONE_SEGMENT,
    FailingFsyncOf,
    crash,
    everything,
    facts,
    fully_recovered,
    put,
    write_and_close,
)


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
