"""LogManager: discovery of partition dirs, creation, deletion, maintenance, close."""
import os

import pytest

from kcoord.coordinator.testing import ManualClock
from kcoord.storage import LogConfig, LogManager, StorageError
from kcoord.storage.manager import RECOVERY_POINT_CHECKPOINT, parse_partition_dir
from tests.storage.storage_helpers import batch


def test_parse_partition_dir_names():
    assert parse_partition_dir("__consumer_offsets-12") == ("__consumer_offsets", 12)
    assert parse_partition_dir("my-topic-with-dashes-3") == ("my-topic-with-dashes", 3)
    assert parse_partition_dir("t-0.8c1e-delete") is None
    assert parse_partition_dir("cleaner-offset-checkpoint") is None
    assert parse_partition_dir("nodash") is None


async def test_reopen_finds_every_partition(tmp_path):
    mgr = LogManager(str(tmp_path))
    for p in range(3):
        await mgr.get_or_create("__consumer_offsets", p).append_durable(batch(p + 1))
    await mgr.get_or_create("my-topic", 0).append_durable(batch())
    (tmp_path / "not-a-partition").write_text("x")
    await mgr.close()
    again = LogManager(str(tmp_path))
    assert again.partitions() == [("__consumer_offsets", 0), ("__consumer_offsets", 1),
                                  ("__consumer_offsets", 2), ("my-topic", 0)]
    assert [again.get("__consumer_offsets", p).log_end_offset for p in range(3)] == [1, 2, 3]
    assert again.topics() == {"__consumer_offsets": [0, 1, 2], "my-topic": [0]}
    await again.close()


async def test_get_or_create_returns_same_log_and_applies_config(tmp_path):
    mgr = LogManager(str(tmp_path))
    log = mgr.get_or_create("t", 0)
    assert log.config.cleanup_policy == "delete"
    compact = LogConfig(cleanup_policy="compact")
    assert mgr.get_or_create("t", 0, compact) is log
    assert log.config is compact
    with pytest.raises(StorageError):
        mgr.get_or_create("../evil", 0)
    await mgr.close()


async def test_delete_topic_removes_its_partitions_only(tmp_path):
    mgr = LogManager(str(tmp_path))
    for p in range(2):
        await mgr.get_or_create("doomed", p).append_durable(batch())
    await mgr.get_or_create("kept", 0).append_durable(batch())
    assert mgr.delete_topic("doomed") == 2
    assert mgr.partitions() == [("kept", 0)]
    assert sorted(os.listdir(tmp_path)) == ["kept-0", RECOVERY_POINT_CHECKPOINT]
    assert mgr.get_or_create("doomed", 0).log_end_offset == 0  # recreated empty
    await mgr.close()


def test_leftover_delete_dirs_are_removed_on_open(tmp_path):
    leftover = tmp_path / "t-0.abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"")
    mgr = LogManager(str(tmp_path))
    assert mgr.partitions() == []
    assert not leftover.exists()


async def test_maintenance_applies_retention_and_compaction(tmp_path):
    clock = ManualClock(10_000_000)
    mgr = LogManager(str(tmp_path), LogConfig(segment_bytes=300, retention_ms=1000), clock=clock.now_ms)
    events = mgr.get_or_create("events", 0)
    offsets = mgr.get_or_create("__consumer_offsets", 0, LogConfig(segment_bytes=300, cleanup_policy="compact"))
    for i in range(20):
        await events.append_durable(batch(ts=10_000_000 + i))
        await offsets.append_durable(batch(key=b"group", value=b"%d" % i))
    offsets.roll()
    await offsets.sync()
    await mgr.maintain_once(now_ms=10_000_000 + 5000)
    assert events.log_start_offset > 0
    assert len(events.segments) == 1
    assert offsets.dirty_ratio() == 0.0
    await mgr.close()


@pytest.mark.parametrize("flush_by", ["close", "maintenance"])
async def test_logs_without_flush_on_append_are_fsynced_by_close_and_maintenance(tmp_path, flush_by):
    mgr = LogManager(str(tmp_path), LogConfig(flush_on_append=False))
    log = mgr.get_or_create("t", 0)
    await log.append_durable(batch())
    assert log.recovery_point == 0
    if flush_by == "close":
        await mgr.close()
        assert log.closed
    else:
        await mgr.maintain_once()
    assert log.recovery_point == 1
    await mgr.close()


def test_errors_name_kafka_error_codes():
    from kcoord.protocol.errors import ErrorCode
    from kcoord.storage import CorruptRecordError, OffsetOutOfRangeError, RecordTooLargeError
    assert StorageError("x").error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert CorruptRecordError("x").error_code == ErrorCode.CORRUPT_MESSAGE
    assert OffsetOutOfRangeError("x").error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert RecordTooLargeError("x").error_code == ErrorCode.RECORD_LIST_TOO_LARGE


async def test_topic_configs_apply_from_open_and_to_new_partitions(tmp_path):
    mgr = LogManager(str(tmp_path))
    await mgr.get_or_create("__consumer_offsets", 0).append_durable(batch())
    await mgr.close()
    compact = LogConfig(cleanup_policy="compact")
    mgr = LogManager(str(tmp_path), topic_configs={"__consumer_offsets": compact})
    assert mgr.get("__consumer_offsets", 0).config is compact
    assert mgr.get_or_create("__consumer_offsets", 1).config is compact
    assert mgr.get_or_create("other", 0).config is mgr.default_config
    small = LogConfig(segment_bytes=1000)
    mgr.set_topic_config("other", small)
    assert mgr.get("other", 0).config is small and mgr.get_or_create("other", 1).config is small
    await mgr.close()


async def test_cleaner_checkpoint_survives_restart(tmp_path):
    compact = LogConfig(segment_bytes=300, cleanup_policy="compact")
    mgr = LogManager(str(tmp_path), topic_configs={"__consumer_offsets": compact})
    log = mgr.get_or_create("__consumer_offsets", 0)
    for i in range(20):
        await log.append_durable(batch(key=b"k%d" % (i % 2)))
    log.roll()
    await log.sync()
    await mgr.maintain_once(now_ms=0)
    cleaned_to = log.first_dirty_offset
    assert cleaned_to > 0 and log.dirty_ratio() == 0.0
    await mgr.close()
    text = (tmp_path / "cleaner-offset-checkpoint").read_text().splitlines()
    assert text == ["0", "1", f"__consumer_offsets 0 {cleaned_to}"]
    again = LogManager(str(tmp_path), topic_configs={"__consumer_offsets": compact})
    reopened = again.get("__consumer_offsets", 0)
    assert reopened.first_dirty_offset == cleaned_to and not reopened.needs_compaction()
    await again.close()
    (tmp_path / "cleaner-offset-checkpoint").write_text("garbage\n")
    third = LogManager(str(tmp_path), topic_configs={"__consumer_offsets": compact})
    assert third.get("__consumer_offsets", 0).needs_compaction()  # unknown progress: clean again
    await third.close()
