"""Shared helpers for the storage tests (tests/storage is a package: `from tests.storage.storage_helpers import ...`)."""
from kcoord.protocol.records import build_batch


def batch(n: int = 1, *, key: bytes | None = b"k", value: bytes = b"v", ts: int = 1_000,
          compression: int = 0) -> bytes:
    """n records (key, value-i) at timestamp ts."""
    return build_batch([(key, value + b"-%d" % i, (), ts) for i in range(n)], compression=compression)


def segment_facts(segment):
    """Everything a segment knows about itself, in memory and in its index files."""
    return (segment.base_offset, segment.size, segment.next_offset, segment.max_timestamp,
            segment.offset_of_max_timestamp, segment.rolling_timestamp, segment.index.to_bytes(),
            segment.time_index.to_bytes(), open(segment.index_path, "rb").read(),
            open(segment.timeindex_path, "rb").read())
