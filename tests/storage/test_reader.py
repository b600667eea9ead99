"""kcoord.storage.reader: read-only iteration over a partition directory."""
import os

import pytest

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.records import decode_records
from kcoord.storage import LogConfig, PartitionLog
from kcoord.storage.reader import iter_partition_batches, iter_segment_batches, list_segments
from tests.storage.storage_helpers import batch


@pytest.fixture
def partition_dir(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=400))
    for i in range(20):
        log.append(batch(2, value=b"v%d" % i))
    log.close()
    return str(tmp_path / "t-0")


def test_lists_segments_and_reads_every_batch_in_order(partition_dir):
    segments = list_segments(partition_dir)
    assert len(segments) > 2 and segments[0][0] == 0
    offsets = [r.offset for _, b in iter_partition_batches(partition_dir) for r in decode_records(b)]
    assert offsets == list(range(40))
    assert [h.base_offset for h, _ in iter_partition_batches(partition_dir, start_offset=23)][0] == 22


def test_never_writes(partition_dir):
    path = list_segments(partition_dir)[-1][1]
    with open(path, "ab") as f:
        f.write(b"\x00" * 20)  # a torn tail, as during an append
    before = {n: os.path.getsize(os.path.join(partition_dir, n)) for n in os.listdir(partition_dir)}
    assert len(list(iter_partition_batches(partition_dir))) == 20
    assert before == {n: os.path.getsize(os.path.join(partition_dir, n)) for n in os.listdir(partition_dir)}


def test_corruption_before_the_tail_raises(partition_dir):
    path = list_segments(partition_dir)[0][1]
    with open(path, "r+b") as f:
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(DecodeError):
        list(iter_segment_batches(path, last_segment=False))
    assert len(list(iter_segment_batches(path, verify=False))) > 0
