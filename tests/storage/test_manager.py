"""LogManager: discovery of partition dirs, creation, deletion, maintenance, close."""
import os

import pytest
from storage_helpers import ManualClock, batch

from storage import LogConfig, LogManager, StorageError
from storage.manager import parse_partition_dir


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
    assert sorted(os.listdir(tmp_path)) == ["kept-0"]
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
    mgr = LogManager(str(tmp_path), LogConfig(segment_bytes=300, retention_ms=1000), clock=clock)
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


async def test_close_flushes_everything(tmp_path):
    mgr = LogManager(str(tmp_path), LogConfig(flush_on_append=False))
    log = mgr.get_or_create("t", 0)
    await log.append_durable(batch())
    assert log.recovery_point == 0
    await mgr.close()
    assert log.recovery_point == 1 and log.closed
