"""`replication-offset-checkpoint`: the high watermarks of a log dir's partitions, as Kafka's ReplicaManager
writes them (checkpointHighWatermarks into an OffsetCheckpointFile: version 0, the count, then
"topic partition offset" lines), atomically; read back when a node starts."""
from __future__ import annotations

import asyncio
import os

from kcoord.storage import LogManager
from kcoord.storage.manager import HIGH_WATERMARK_CHECKPOINT


def manager_with(path, *partitions) -> LogManager:
    mgr = LogManager(str(path))
    for topic, partition in partitions:
        mgr.get_or_create(topic, partition)
    return mgr


async def test_round_trip_in_kafkas_text_format(tmp_path):
    mgr = manager_with(tmp_path, ("orders", 0), ("orders", 1), ("__consumer_offsets", 7))
    hws = {("orders", 1): 42, ("__consumer_offsets", 7): 0, ("orders", 0): 1_000_000_000_000}
    mgr.checkpoint_high_watermarks(hws)
    text = (tmp_path / HIGH_WATERMARK_CHECKPOINT).read_bytes()
    assert text == b"0\n3\n__consumer_offsets 7 0\norders 0 1000000000000\norders 1 42\n"
    assert not os.path.exists(tmp_path / (HIGH_WATERMARK_CHECKPOINT + ".tmp"))  # renamed into place
    assert mgr.read_high_watermarks() == hws
    await mgr.close()
    again = LogManager(str(tmp_path))
    assert again.read_high_watermarks() == hws
    await again.close()


async def test_only_this_dirs_partitions_are_written_and_a_missing_file_reads_empty(tmp_path):
    mgr = manager_with(tmp_path, ("a", 0))
    assert mgr.read_high_watermarks() == {}
    mgr.checkpoint_high_watermarks({("a", 0): 5, ("elsewhere", 3): 9})
    assert (tmp_path / HIGH_WATERMARK_CHECKPOINT).read_text() == "0\n1\na 0 5\n"
    mgr.checkpoint_high_watermarks({})
    assert (tmp_path / HIGH_WATERMARK_CHECKPOINT).read_text() == "0\n0\n"
    (tmp_path / HIGH_WATERMARK_CHECKPOINT).write_text("0\n2\na 0 5\n")  # torn: count says 2
    assert mgr.read_high_watermarks() == {}
    await mgr.close()


async def test_periodic_and_shutdown_checkpoints_and_topic_deletion(tmp_path):
    mgr = manager_with(tmp_path, ("a", 0), ("b", 0))
    hws = {("a", 0): 1, ("b", 0): 2}
    mgr.start_high_watermark_checkpoints(lambda: dict(hws), interval_s=0.01)
    for _ in range(200):
        await asyncio.sleep(0.01)
        if mgr.read_high_watermarks() == hws:
            break
    assert mgr.read_high_watermarks() == hws
    mgr.delete_topic("b")  # its entry goes with it
    assert mgr.read_high_watermarks() == {("a", 0): 1}
    hws[("a", 0)] = 7
    await mgr.close()  # the last values, written before the logs close
    assert (tmp_path / HIGH_WATERMARK_CHECKPOINT).read_text() == "0\n1\na 0 7\n"


async def test_a_single_node_writes_no_high_watermark_file(tmp_path):
    mgr = manager_with(tmp_path, ("a", 0))
    await mgr.close()
    assert not (tmp_path / HIGH_WATERMARK_CHECKPOINT).exists()
