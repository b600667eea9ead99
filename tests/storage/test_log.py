"""PartitionLog: append, read, roll, index, recovery, retention, timestamps, validation."""
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords

from kcoord.coordinator.testing import ManualClock
from kcoord.protocol.records import build_batch, decode_records, iter_batches, parse_batch_header
from kcoord.storage import (
    CorruptRecordError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordTooLargeError,
    StorageError,
)
from kcoord.storage.index import OffsetIndex, TimeIndex
from tests.storage.storage_helpers import batch


def offsets_in(data: bytes) -> list[int]:
    return [rec.offset for _, _, b in iter_batches(data) for rec in decode_records(b)]


def open_log(tmp_path, clock=None, **config):
    kwargs = {"clock": clock.now_ms} if clock is not None else {}
    return PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(**config), **kwargs)


def test_append_assigns_offsets_to_whole_batches(tmp_path):
    log = open_log(tmp_path)
    first = log.append(batch(3))
    second = log.append(batch(2) + batch(4))
    assert (first.base_offset, first.last_offset) == (0, 2)
    assert (second.base_offset, second.last_offset) == (3, 8)
    assert log.log_end_offset == 9
    assert offsets_in(log.read(0, 1 << 20)) == list(range(9))
    # The batch holding offset 4 starts at 3: reads return whole batches.
    assert offsets_in(log.read(4, 1 << 20))[0] == 3


def test_read_returns_at_least_one_batch_and_respects_max_bytes(tmp_path):
    log = open_log(tmp_path)
    big = batch(1, value=b"x" * 5000)
    log.append(big)
    log.append(batch(1))
    assert len(log.read(0, 10)) == len(big)
    assert len(log.read(0, len(big) + 10)) == len(big)
    assert offsets_in(log.read(0, 1 << 20)) == [0, 1]
    assert log.read(2, 100) == b""
    assert offsets_in(log.read(0, 1 << 20, max_offset=1)) == [0]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)


def test_segments_roll_at_segment_bytes_and_keep_kafka_names(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000)
    for _ in range(20):
        log.append(batch(2, value=b"y" * 100))
    names = sorted(os.listdir(tmp_path / "t-0"))
    logs = [n for n in names if n.endswith(".log")]
    assert len(logs) > 3
    assert logs[0] == "00000000000000000000.log"
    assert all(len(n) == 24 for n in logs)
    for segment in log.segments:
        assert segment.size <= 1000
        assert f"{segment.base_offset:020d}.index" in names
    assert offsets_in(b"".join(log.read(o, 1) for o in range(0, 40, 2))) == list(range(40))


def test_segment_ms_rolls_on_batch_timestamps(tmp_path):
    log = open_log(tmp_path, segment_ms=1000)
    log.append(batch(ts=10_000))
    log.append(batch(ts=10_500))
    assert len(log.segments) == 1
    log.append(batch(ts=11_001))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_sparse_index_entries_every_interval(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=4096)
    for _ in range(200):
        log.append(batch(1, value=b"z" * 200))
    log.flush()  # index files are brought up to date on flush, roll and close
    segment = log.active_segment
    entries = OffsetIndex.parse(open(segment.index_path, "rb").read())
    assert len(entries) >= 8
    for relative, position in entries:
        header = parse_batch_header(os.pread(segment.fd, 61, position))
        assert header.last_offset == relative
    # Every lookup through the index lands on the right batch.
    for offset in range(200):
        assert offsets_in(log.read(offset, 1)) == [offset]


def test_segments_decode_with_kafka_python_reader(tmp_path):
    log = open_log(tmp_path)
    for codec in range(5):
        log.append(batch(3, compression=codec))
    log.close()
    data = open(tmp_path / "t-0" / "00000000000000000000.log", "rb").read()
    records = MemoryRecords(data)
    seen = []
    while records.has_next():
        b = records.next_batch()
        assert b.validate_crc()
        seen.extend((r.offset, r.value) for r in b)
    assert seen == [(i * 3 + j, b"v-%d" % j) for i in range(5) for j in range(3)]


def test_reopen_recovers_offsets_and_data(tmp_path):
    log = open_log(tmp_path, segment_bytes=500)
    for i in range(30):
        log.append(batch(1, value=b"%d" % i))
    log.close()
    again = open_log(tmp_path, segment_bytes=500)
    assert again.log_end_offset == 30
    assert again.recovery_point == 30
    assert offsets_in(b"".join(again.read(o, 1) for o in range(30))) == list(range(30))
    assert again.append(batch()).base_offset == 30


def test_recovery_truncates_torn_tail_and_rebuilds_index(tmp_path, caplog):
    log = open_log(tmp_path, index_interval_bytes=100)
    for _ in range(10):
        log.append(batch(1, value=b"q" * 80))
    path, index_path = log.active_segment.log_path, log.active_segment.index_path
    size = log.active_segment.size
    log.close()
    with open(path, "ab") as f:
        f.write(b"\x00" * 30)  # a torn half-batch
    with open(index_path, "wb") as f:
        f.write(b"garbage!")
    again = open_log(tmp_path, index_interval_bytes=100)
    assert os.path.getsize(path) == size
    assert again.log_end_offset == 10
    assert "dropped 30 bytes" in caplog.text
    assert len(OffsetIndex.parse(open(index_path, "rb").read())) == len(again.active_segment.index) > 0


def test_recovery_drops_batch_with_bad_crc_and_everything_after(tmp_path):
    log = open_log(tmp_path)
    sizes = [len(log.read(log.append(batch(1)).base_offset, 1)) for _ in range(5)]
    path = log.active_segment.log_path
    log.close()
    with open(path, "r+b") as f:
        f.seek(sizes[0] * 2 + 70)  # inside the third batch's records
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    again = open_log(tmp_path)
    assert again.log_end_offset == 2
    assert os.path.getsize(path) == sizes[0] * 2


def test_leftover_cleaned_and_orphan_index_files_removed(tmp_path):
    log = open_log(tmp_path)
    log.append(batch())
    log.close()
    d = tmp_path / "t-0"
    (d / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    (d / "00000000000000000077.index").write_bytes(b"")
    (d / "00000000000000000077.timeindex").write_bytes(b"")
    again = open_log(tmp_path)
    assert sorted(os.listdir(d)) == ["00000000000000000000.index", "00000000000000000000.log",
                                     "00000000000000000000.timeindex", "leader-epoch-checkpoint"]
    assert again.log_end_offset == 1


def test_invalid_record_sets_are_rejected(tmp_path):
    log = open_log(tmp_path)
    good = bytearray(batch(2))
    with pytest.raises(CorruptRecordError):
        log.append(good[:-1])
    with pytest.raises(CorruptRecordError):
        log.append(bytes(good) + b"\x00\x01")
    good[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append(good)
    with pytest.raises(CorruptRecordError):
        log.append(b"")
    # A header whose offset span disagrees with its record count (offsets come from the header).
    liar = build_batch([(None, b"x")], last_offset_delta=1000, timestamp_ms=1)
    with pytest.raises(CorruptRecordError, match="1001 offsets"):
        log.append(liar)
    with pytest.raises(CorruptRecordError):
        log.append(build_batch([], timestamp_ms=1))
    assert log.log_end_offset == 0


def test_log_append_time_rewrites_timestamps(tmp_path):
    clock = ManualClock(50_000)
    log = open_log(tmp_path, clock=clock, message_timestamp_type="LogAppendTime")
    clock.sleep(5_555)
    info = log.append(batch(2, ts=1))
    assert info.log_append_time_ms == 55_555
    data = log.read(0, 1 << 20)
    assert [r.timestamp for r in decode_records(data)] == [55_555, 55_555]
    assert log.offset_for_timestamp(55_000) == (0, 55_555)


def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    for i in range(10):
        log.append(build_batch([(None, b"a", (), 1000 + 10 * i), (None, b"b", (), 1005 + 10 * i)]))
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (1, 1005)
    assert log.offset_for_timestamp(1006) == (2, 1010)
    assert log.offset_for_timestamp(1095) == (19, 1095)
    assert log.offset_for_timestamp(1096) is None
    assert log.offset_for_timestamp(-1) == (20, -1)
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-3) == (19, 1095)


def test_truncate_to_across_segments(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    for _ in range(12):
        log.append(batch(2))
    log.truncate_to(9)  # inside batch 8-9: the whole batch goes
    assert log.log_end_offset == 8
    assert offsets_in(b"".join(log.read(o, 1) for o in range(0, 8, 2))) == list(range(8))
    assert log.append(batch(1)).base_offset == 8
    log.truncate_to(0)
    assert log.log_end_offset == 0
    assert log.read(0, 100) == b""


def test_retention_by_time_and_size_advances_log_start(tmp_path, clock):
    log = open_log(tmp_path, clock=clock, segment_bytes=300, retention_ms=1000)
    for i in range(10):
        log.append(batch(1, ts=10_000 + i * 100))
    log.flush()
    segments_before = len(log.segments)
    assert log.delete_old_segments(now_ms=10_500) == 0
    deleted = log.delete_old_segments(now_ms=11_450)
    assert deleted > 0 and len(log.segments) == segments_before - deleted
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.segments[0].max_timestamp >= 11_450 - 1000
    sized = PartitionLog(str(tmp_path / "s-0"), "s", 0, LogConfig(segment_bytes=300, retention_bytes=600,
                                                                   retention_ms=-1))
    for _ in range(20):
        sized.append(batch(1))
    sized.flush()
    sized.delete_old_segments(now_ms=0)
    assert sized.size_bytes - sized.active_segment.size < 600
    assert sized.log_start_offset > 0
    assert sized.log_end_offset == 20


def test_retention_never_deletes_undurable_segments(tmp_path):
    log = open_log(tmp_path, segment_bytes=300, retention_ms=0, flush_on_append=False)
    for _ in range(10):
        log.append(batch(1, ts=1))
    log.recovery_point = 0  # pretend nothing was fsynced yet
    assert log.delete_old_segments(now_ms=10**12) == 0


def test_closed_log_refuses_work(tmp_path):
    log = open_log(tmp_path)
    log.close()
    with pytest.raises(StorageError):
        log.append(batch())


def test_record_set_larger_than_a_segment_is_rejected(tmp_path):
    log = open_log(tmp_path, segment_bytes=500)
    with pytest.raises(RecordTooLargeError):
        log.append(batch(1, value=b"x" * 600))
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", range(5))
def test_client_built_batches_are_stored_and_served_byte_exact(tmp_path, codec):
    from aiokafka.record.default_records import DefaultRecordBatchBuilder as AiokafkaBuilder
    from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

    log = open_log(tmp_path)
    produced = []
    for builder_cls in (KafkaPythonBuilder, AiokafkaBuilder):
        builder = builder_cls(2, codec, False, 42, 0, 7, 1 << 20)
        for i in range(10):
            builder.append(i, 1_700_000_000_000 + i, b"k%d" % i, b"v" * 200, [("h", b"%d" % i)])
        data = bytes(builder.build())
        produced.append(data)
        log.append(data)
    stored = log.read(0, 1 << 20)
    batches = list(iter_batches(stored, verify=True))
    assert [h.base_offset for _, h, _ in batches] == [0, 10]
    assert [h.partition_leader_epoch for _, h, _ in batches] == [0, 0]  # producers send -1
    for (_, header, view), original in zip(batches, produced, strict=True):
        # Only the base offset changed: the CRC-covered bytes are the producer's own.
        assert bytes(view[21:]) == original[21:]
        assert (header.producer_id, header.base_sequence, header.compression) == (42, 7, codec)
        assert header.crc == parse_batch_header(original).crc
    mr = MemoryRecords(stored)
    seen = []
    while mr.has_next():
        seen.extend((r.offset, r.key) for r in mr.next_batch())
    assert seen == [(i, b"k%d" % (i % 10)) for i in range(20)]


def test_batches_iterates_across_segments_from_any_offset(tmp_path):
    log = open_log(tmp_path, segment_bytes=300, index_interval_bytes=50)
    for i in range(30):
        log.append(batch(2, value=b"%d" % i))
    assert len(log.segments) > 3
    assert [h.base_offset for h, _ in log.batches()] == list(range(0, 60, 2))
    assert [h.base_offset for h, _ in log.batches(start_offset=33)][:2] == [32, 34]
    assert [h.base_offset for h, _ in log.batches(start_offset=10, max_offset=16)] == [10, 12, 14]
    assert [r.offset for _, b in log.batches(start_offset=58) for r in decode_records(b)] == [58, 59]
    assert list(log.batches(start_offset=60)) == []


def test_index_files_are_written_in_batches_and_rebuilt_after_a_crash(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=1)  # an entry of each index per append
    for i in range(100):
        log.append(batch(1, ts=1_000 + i))
    segment = log.active_segment
    on_disk = OffsetIndex.parse(open(segment.index_path, "rb").read())
    assert 0 < len(on_disk) < len(segment.index) >= 90  # written a batch at a time
    assert on_disk == OffsetIndex.parse(segment.index.to_bytes())[:len(on_disk)]
    # A crash (no flush, no close): the next open rebuilds the index files from the log.
    again = open_log(tmp_path)
    segment = again.active_segment
    assert open(segment.index_path, "rb").read() == segment.index.to_bytes()
    assert open(segment.timeindex_path, "rb").read() == segment.time_index.to_bytes()
    # One time entry per offset entry, and the closing one for the segment's max timestamp.
    assert len(segment.time_index) == len(segment.index) + 1
    assert segment.time_index.timestamps[-1] == segment.max_timestamp == 1_099
    assert [offsets_in(again.read(o, 1)) for o in range(100)] == [[o] for o in range(100)]
    again.close()
    log.close()


def test_time_index_file_records_growing_max_timestamps(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=200)
    timestamps = [1000 + (i * 37) % 500 + i * 3 for i in range(120)]  # rising, with dips
    for ts in timestamps:
        log.append(batch(1, ts=ts))
    log.flush()  # index files are brought up to date on flush, roll and close
    segment = log.active_segment
    entries = TimeIndex.parse(open(segment.timeindex_path, "rb").read())
    assert len(entries) > 5
    assert [t for t, _ in entries] == sorted({t for t, _ in entries})
    for timestamp, relative in entries:
        # The entry's offset is where the segment's max timestamp first reached that value.
        assert timestamps[relative] == timestamp == max(timestamps[:relative + 1])
        assert max(timestamps[:relative]) < timestamp
    log.close()
    with open(segment.timeindex_path, "wb") as f:
        f.write(b"\x00" * 12)
    again = open_log(tmp_path, index_interval_bytes=200)
    assert TimeIndex.parse(open(segment.timeindex_path, "rb").read()) == entries
    assert again.active_segment.time_index.to_bytes() == open(segment.timeindex_path, "rb").read()


@settings(max_examples=30, deadline=None)
@given(deltas=st.lists(st.integers(min_value=-30, max_value=60), min_size=1, max_size=80),
       picks=st.lists(st.tuples(st.floats(min_value=0, max_value=1), st.integers(min_value=-5, max_value=5)),
                      min_size=1, max_size=10))
def test_offset_for_timestamp_matches_a_full_scan(tmp_path_factory, deltas, picks):
    # Mostly rising timestamps with dips, as producers' clocks give: the time index matters then.
    timestamps = [max(0, 1000 + sum(deltas[:i + 1])) for i in range(len(deltas))]
    log = open_log(tmp_path_factory.mktemp("ts"), index_interval_bytes=150, segment_bytes=1500)
    for ts in timestamps:
        log.append(build_batch([(None, b"a", (), ts), (None, b"b", (), ts + 1)]))
    targets = [max(0, timestamps[int(at * (len(timestamps) - 1))] + jitter) for at, jitter in picks]
    for target in targets:
        expected = next(((o, t) for o, t in enumerate(t for ts in timestamps for t in (ts, ts + 1))
                         if t >= target), None)
        assert log.offset_for_timestamp(target) == expected
    log.close()


@pytest.mark.parametrize("bad", [
    {"segment_bytes": 2**31}, {"segment_bytes": 13}, {"cleanup_policy": "archive"},
    {"message_timestamp_type": "WallClock"}, {"min_cleanable_dirty_ratio": 1.5},
])
def test_log_config_rejects_values_kafka_rejects(bad):
    with pytest.raises(ValueError):
        LogConfig(**bad)
    assert LogConfig(cleanup_policy="compact,delete").compact and LogConfig(cleanup_policy="compact,delete").delete


def test_batches_larger_than_a_scan_chunk(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=100)
    log.append(batch(1, value=b"small", ts=1))
    big = os.urandom(1_500_000)  # > the 1 MiB scan chunk and the 16 KiB lookup chunk
    log.append(build_batch([(b"big", big)], timestamp_ms=5))
    log.append(batch(1, value=b"after", ts=2))
    path = log.active_segment.log_path
    log.close()
    with open(path, "ab") as f:
        f.write(build_batch([(b"torn", big)], timestamp_ms=6)[:1_200_000])
    again = open_log(tmp_path, index_interval_bytes=100)
    assert again.log_end_offset == 3
    assert [r.value for r in decode_records(again.read(1, 1))] == [big]
    assert [r.value for r in decode_records(again.read(2, 1))] == [b"after-0"]
    assert again.offset_for_timestamp(5) == (1, 5)


def test_read_cut_at_an_indexed_batch_keeps_the_batches_before_it(tmp_path):
    # Regression: a max_bytes limit landing exactly on an indexed batch start returned one batch.
    log = open_log(tmp_path, index_interval_bytes=10)
    sizes = [len(batch(1, value=b"%d" % i)) for i in range(6)]
    for i in range(6):
        log.append(batch(1, value=b"%d" % i))
    assert len(log.active_segment.index) >= 4
    for n in range(1, 6):
        assert offsets_in(log.read(0, sum(sizes[:n]))) == list(range(n))
        assert offsets_in(log.read(0, sum(sizes[:n]) + 1)) == list(range(n))


def test_a_trusted_append_skips_only_the_crc_check(tmp_path):
    # The coordinator's own batches are not re-checksummed; their framing is still checked.
    log = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig())
    good = build_batch([(b"k", b"v")])
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append(bytes(bad_crc))
    assert log.append(bytes(bad_crc), trusted=True).base_offset == 0
    with pytest.raises(CorruptRecordError):
        log.append(good + b"\x00\x01", trusted=True)  # not whole batches
    assert log.log_end_offset == 1
    log.close()


def test_log_start_offset_moves_only_up_and_breached_segments_go_under_any_policy(tmp_path):
    """UnifiedLog.maybeIncrementLogStartOffset / deleteLogStartOffsetBreachedSegments: reads below the new
    start fail at once; a segment goes once the next one starts at or below it, whatever the policy."""
    log = open_log(tmp_path, segment_bytes=300, cleanup_policy="compact", retention_ms=-1)
    for _ in range(12):
        log.append(batch(1))
    log.flush()
    bases = [s.base_offset for s in log.segments]
    inside = bases[2] + 1
    assert log.maybe_increment_log_start_offset(inside) is True
    assert log.maybe_increment_log_start_offset(1) is False and log.log_start_offset == inside
    with pytest.raises(OffsetOutOfRangeError):
        log.read(inside - 1, 100)
    assert offsets_in(log.read(inside, 1 << 20))[0] == inside
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(log.log_end_offset + 1)
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.segments][0] == bases[2] and log.log_start_offset == inside


def test_log_start_checkpoint_survives_reopen_and_topic_deletion(tmp_path):
    from kcoord.storage import LogManager

    mgr = LogManager(str(tmp_path))
    plog = mgr.get_or_create("t", 0)
    for _ in range(5):
        plog.append(batch(1))
    plog.flush()
    plog.maybe_increment_log_start_offset(3)
    mgr.write_log_start_checkpoint()
    plog.close()
    again = LogManager(str(tmp_path))
    assert again.get("t", 0).log_start_offset == 3
    again.delete_topic("t")
    recreated = again.get_or_create("t", 0)
    for _ in range(5):
        recreated.append(batch(1))
    recreated.close()
    assert LogManager(str(tmp_path)).get("t", 0).log_start_offset == 0
