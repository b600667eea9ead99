"""Finding segments the way a Kafka log dir lays them out (Spark's own listing would skip `__*`)."""
from kcoord.analytics import layout


def touch(path, data=b""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_segments_of_live_partitions_only_in_log_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    touch(a / "__consumer_offsets-3" / "00000000000000000100.log", b"xx")
    touch(a / "__consumer_offsets-3" / "00000000000000000000.log")
    touch(a / "__consumer_offsets-3" / "00000000000000000000.index")
    touch(a / "__consumer_offsets-3" / "00000000000000000100.log.deleted")
    touch(a / "orders-0.5f1a2b3c-delete" / "00000000000000000000.log")      # a deleted partition
    touch(a / "orders-10" / "00000000000000000000.log")
    touch(b / "__cluster_metadata-0" / "00000000000000000000.log")
    touch(b / "orders-2" / "00000000000000000007.log")
    touch(b / "recovery-point-offset-checkpoint")
    found = layout.list_segments(f"{a},{b}")
    assert [(s.topic, s.partition, s.base_offset) for s in found] == [
        ("__cluster_metadata", 0, 0), ("__consumer_offsets", 3, 0), ("__consumer_offsets", 3, 100),
        ("orders", 2, 7), ("orders", 10, 0)]
    assert [s.topic for s in layout.data_segments([str(a), str(b)])] == ["orders", "orders"]
    first = found[1]
    assert [s.base_offset for s in layout.following(first, found)] == [100]
    assert found[2].size == 2
