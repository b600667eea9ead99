"""The coordinator's one-pass batch builder writes exactly the bytes of the general builder."""
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.record_batch import build_coordinator_batch, build_offset_commit_batch
from kcoord.coordinator.records import offset_commit_records
from kcoord.protocol.consumer_offsets import (
    OffsetCommitValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kcoord.protocol.records import GZIP, build_batch, decode_records, verify_crc

TS = 1_700_000_000_123

record = st.tuples(
    st.binary(min_size=0, max_size=300),
    st.none() | st.binary(min_size=0, max_size=300),
    st.just([]) | st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(record, max_size=60))
def test_same_bytes_as_build_batch(records):
    assert build_coordinator_batch(records, timestamp_ms=TS) == build_batch(records, timestamp_ms=TS)


def test_offset_commit_records_round_trip():
    records = [(encode_offset_commit_key("g", "t", p), encode_offset_commit_value(OffsetCommitValue(p, "", TS)), [])
               for p in range(300)] + [(encode_offset_commit_key("g", "t", 999), None, [])]
    batch = build_coordinator_batch(records, timestamp_ms=TS)
    assert batch == build_batch(records, timestamp_ms=TS)
    assert verify_crc(batch)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decode_records(batch)] == [
        (i, TS, k, v) for i, (k, v, _) in enumerate(records)]


def test_long_fields_and_big_batches_fall_back_to_the_general_builder():
    big = [(b"k" * 20_000, b"v", [])]
    assert build_coordinator_batch(big, timestamp_ms=TS) == build_batch(big, timestamp_ms=TS)
    many = [(b"k", b"v", [])] * 17_000
    assert build_coordinator_batch(many, timestamp_ms=TS) == build_batch(many, timestamp_ms=TS)


def test_compression_and_empty_use_the_general_builder():
    records = [(b"k", b"v", [])] * 3
    assert decode_records(build_coordinator_batch(records, GZIP, TS)) == decode_records(
        build_batch(records, compression=GZIP, timestamp_ms=TS))
    assert build_coordinator_batch([], timestamp_ms=TS) == build_batch([], timestamp_ms=TS)


commit_values = st.builds(OffsetCommitValue, st.integers(-(2**63), 2**63 - 1), st.sampled_from(["", "m", "é"]),
                          st.integers(-1, 2**62), st.integers(-(2**31), 2**31 - 1),
                          st.sampled_from([-1, -1, -1, 1_700_000_000_000]), st.none())


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.dictionaries(st.tuples(st.text(max_size=12), st.integers(-(2**31), 2**31 - 1)),
                                             commit_values, max_size=80))
def test_a_commits_batch_is_the_general_builders_batch_of_its_records(group, values):
    records = offset_commit_records(group, values)
    assert records.to_batch(timestamp_ms=TS) == build_batch(list(records), timestamp_ms=TS)
    # again: the record prefixes now come from the cache
    assert offset_commit_records(group, values).to_batch(timestamp_ms=TS) == build_batch(list(records), timestamp_ms=TS)


def test_a_commits_batch_falls_back_for_values_out_of_the_usual_layout():
    usual = {("t", p): OffsetCommitValue(p, "", TS) for p in range(3)}
    assert build_offset_commit_batch("g", usual, TS) is not None
    for odd in (OffsetCommitValue(1, "meta", TS), OffsetCommitValue(1, "", TS, expire_timestamp=TS + 1),
                OffsetCommitValue(2**63, "", TS)):
        values = {**usual, ("t", 9): odd}
        assert build_offset_commit_batch("g", values, TS) is None
        if odd.offset < 2**63:
            records = offset_commit_records("g", values)
            assert records.to_batch(timestamp_ms=TS) == build_batch(list(records), timestamp_ms=TS)
    assert build_offset_commit_batch("g", {}, TS) is None


def test_a_commits_batch_with_partitions_in_another_order_rebuilds_their_prefixes():
    forward = {("t", p): OffsetCommitValue(p, "", TS) for p in range(70)}
    backward = dict(reversed(forward.items()))
    for values in (forward, backward, forward):
        records = offset_commit_records("g-order", values)
        assert records.to_batch(timestamp_ms=TS) == build_batch(list(records), timestamp_ms=TS)
