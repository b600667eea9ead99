"""The OffsetCommit records the coordinator writes are Kafka's bytes: key v1, value v3 (v1 with an
expire timestamp), checked against an independent spelling of the formats."""
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.records import offset_commit_records
from kcoord.protocol.consumer_offsets import OffsetCommitValue, decode_offset_commit_value


def _s(text: str) -> bytes:
    b = text.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def reference(group: str, topic: str, partition: int, v: OffsetCommitValue) -> tuple[bytes, bytes]:
    key = struct.pack(">h", 1) + _s(group) + _s(topic) + struct.pack(">i", partition)
    if v.expire_timestamp >= 0:
        value = struct.pack(">hq", 1, v.offset) + _s(v.metadata) + struct.pack(">qq", v.commit_timestamp,
                                                                                v.expire_timestamp)
    else:
        value = struct.pack(">hqi", 3, v.offset, v.leader_epoch) + _s(v.metadata) + struct.pack(">q", v.commit_timestamp)
    return key, value


values = st.builds(OffsetCommitValue, st.integers(-1, 2**63 - 1), st.text(max_size=20),
                   st.integers(-1, 2**62), st.integers(-1, 2**31 - 1), st.sampled_from([-1, 1_700_000_000_000]), st.none())


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30), st.dictionaries(st.tuples(st.text(max_size=10), st.integers(0, 2**31 - 1)), values,
                                             max_size=20))
def test_records_are_kafka_bytes(group, table):
    records = offset_commit_records(group, table)
    assert [(k, v) for k, v, _ in records] == [reference(group, t, p, v) for (t, p), v in table.items()]
    assert all(not headers for _, _, headers in records)
    for (_, value, _), v in zip(records, table.values(), strict=True):
        # value v1 (an expire timestamp) has no leader epoch field
        assert decode_offset_commit_value(value) == (v if v.expire_timestamp < 0 else v._replace(leader_epoch=-1))
