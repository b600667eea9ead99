"""The segment decoder against an independent encoder (kafka-python's builder + hand-laid layouts)."""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from kcoord.analytics import batches
from kcoord.analytics.segment import SegmentDecoder, batch_summaries
from tests.analytics import storegen as g

V4_VECTOR = bytes.fromhex("0004" "000000000021d4a8" "ffffffff" "01" "0000019964f2d836" "00")


def commits_of(buf, **kw):
    dec = SegmentDecoder(buf, 7, **kw)
    rows = [r for b in dec.commits() for r in b.to_pylist()]
    return rows, dec


def commit_record(ts, group, topic, part, offset, version=3, key_version=1, **kw):
    return (ts, g.offset_commit_key(group, topic, part, key_version),
            g.offset_commit_value(offset, ts, version, **kw), None)


def test_every_value_version_and_compression_matches_what_was_written():
    buf, expected, base = b"", [], 0
    for codec in range(5):
        recs = []
        for version in (0, 1, 2, 3, 4):
            ts = 1_700_000_000_000 + 10 * version + codec
            recs.append(commit_record(ts, f"grp-{codec}", "orders", version, 1000 + version, version,
                                      key_version=version % 2, leader_epoch=5, metadata="meta" * 9 * version,
                                      expire_ts=ts + 99))
            expected.append((base + len(recs) - 1, f"grp-{codec}", version, 1000 + version, ts,
                             5 if version >= 3 else -1, "meta" * 9 * version, ts + 99 if version == 1 else -1))
        buf += g.batch(recs, base, compression=codec)
        base += len(recs)
    assert (batches.scan(buf)["attributes"] & 7).tolist() == [0, 1, 2, 3, 4]   # really compressed
    rows, dec = commits_of(buf)
    got = [(r["log_offset"], r["group"], r["partition"], r["current_offset"], r["commit_timestamp"],
            r["leader_epoch"], r["metadata"], r["expire_timestamp"]) for r in rows]
    assert got == expected
    assert dec.skipped_records == 0
    # Offsets and timestamps agree with kafka-python's own reader.
    theirs = [(rec.offset, rec.timestamp) for b in _kafka_python_batches(buf) for rec in b]
    assert [(r["log_offset"], r["timestamp"]) for r in rows] == theirs


def _kafka_python_batches(buf):
    mr = MemoryRecords(buf)
    while mr.has_next():
        yield list(mr.next_batch())


def test_v4_offset_commit_value_vector_from_a_kafka_4_1_broker():
    key = g.offset_commit_key("g", "t", 0)
    rows, _ = commits_of(g.batch([(1, key, V4_VECTOR, None)], 0))
    (r,) = rows
    assert (r["value_version"], r["current_offset"], r["leader_epoch"], r["metadata"],
            r["commit_timestamp"]) == (4, 2217128, -1, "", 1758335260726)


def test_tombstones_and_group_metadata_are_told_apart():
    gm = g.group_metadata_value(3, "range", "m1", 5, [
        {"member_id": "m1", "client_id": "c1", "host": "/10.0.0.1", "topics": ["orders"],
         "assignment": {"orders": [0, 1]}}])
    headers = [("kcoord.rebalance.cause", b"member_joined"), ("kcoord.rebalance.join_ms", b"12")]
    buf = g.batch([commit_record(10, "g", "orders", 0, 5),
                   (11, g.offset_commit_key("g", "orders", 1), None, None),
                   (12, g.group_metadata_key("g"), gm, headers),
                   (13, g.group_metadata_key("gone"), None, None)], 0)
    rows, _ = commits_of(buf)
    assert [(r["partition"], r["tombstone"], r["current_offset"]) for r in rows] == [
        (0, False, 5), (1, True, None)]
    groups = list(SegmentDecoder(buf, 7).group_rows())
    assert [(r[1], r[3], r[4]) for r in groups] == [(2, "g", False), (3, "gone", True)]
    live = groups[0]
    assert live[5:12] == (3, "consumer", 3, "range", "m1", 5, [
        ("m1", None, "c1", "/10.0.0.1", 300000, 45000, ["orders"], [("orders", 0), ("orders", 1)],
         None, None, None, None, None)])     # the consumer-protocol member fields: none for a classic member
    assert live[12] == {"kcoord.rebalance.cause": "member_joined", "kcoord.rebalance.join_ms": "12"}
    (arrow,) = SegmentDecoder(buf, 7).groups()
    assert arrow.column("members").to_pylist()[0][0]["assignment"] == [
        {"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 1}]


def test_transactions_commit_abort_and_open():
    seg = (g.batch([commit_record(1, "a", "t", 0, 1)], 0)
           + g.batch([commit_record(2, "txn", "t", 0, 100)], 1, transactional=True, producer_id=7)
           + g.batch([commit_record(3, "txn", "t", 1, 200)], 2, transactional=True, producer_id=8)
           + g.marker(8, 3, 4, commit=False)          # pid 8 aborted: its commit must not appear
           + g.marker(7, 4, 5, commit=True)
           + g.batch([commit_record(6, "txn", "t", 2, 300)], 5, transactional=True, producer_id=9))
    rows, _ = commits_of(seg)                          # pid 9 never ends: not visible
    assert [(r["group"], r["partition"], r["current_offset"], r["transactional"]) for r in rows] == [
        ("a", 0, 1, False), ("txn", 0, 100, True)]


def test_a_transaction_is_decided_by_a_marker_in_a_later_segment(tmp_path):
    first = g.batch([commit_record(2, "txn", "t", 0, 100)], 0, transactional=True, producer_id=7)
    later = tmp_path / "00000000000000000001.log"
    later.write_bytes(g.marker(7, 1, 3, commit=True))
    rows, _ = commits_of(first, later_paths=[str(later)])
    assert [r["current_offset"] for r in rows] == [100]
    later.write_bytes(g.marker(7, 1, 3, commit=False))
    assert commits_of(first, later_paths=[str(later)])[0] == []


@pytest.mark.parametrize("tail,reason", [(bytes(4096), "zero-fill"), ("torn", "torn"), ("crc", "crc")])
def test_reading_stops_cleanly_at_a_bad_tail(tail, reason):
    good = g.batch([commit_record(1, "g", "t", 0, 1)], 0) + g.batch([commit_record(2, "g", "t", 0, 2)], 1)
    bad = g.batch([commit_record(3, "g", "t", 0, 3)], 2)
    if tail == "torn":
        tail = bad[:-5]
    elif tail == "crc":
        tail = bytearray(bad)
        tail[-1] ^= 0xFF
        tail = bytes(tail)
    buf = good + tail
    scan = batches.scan(buf)
    assert (len(scan), scan.valid_bytes, scan.stop_reason) == (2, len(good), reason)
    assert [r["current_offset"] for r in commits_of(buf)[0]] == [1, 2]


def test_batch_summaries_give_log_end_offsets_and_times():
    buf = (g.batch([(100, None, b"x", None)] * 3, 0)
           + g.batch([(250, None, b"y" * 100, None)] * 2, 3, compression=1))
    rows = batch_summaries(buf, "orders", 4).to_pylist()
    assert [(r["partition"], r["base_offset"], r["last_offset"], r["max_timestamp"], r["compression"])
            for r in rows] == [(4, 0, 2, 100, 0), (4, 3, 4, 250, 1)]


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=90)
commit = st.tuples(names, names, st.integers(0, 2**31 - 1), st.integers(-1, 2**62),
                   st.sampled_from([0, 1, 2, 3, 4]), st.text(max_size=40))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(commit, min_size=1, max_size=6), min_size=1, max_size=5),
       st.sampled_from([0, 1, 3]))
def test_any_commit_round_trips(batches_of_commits, codec):
    buf, base, expected = b"", 0, []
    for recs in batches_of_commits:
        built = [commit_record(base + i, gr, tp, p, off, v, metadata=md)
                 for i, (gr, tp, p, off, v, md) in enumerate(recs)]
        buf += g.batch(built, base, compression=codec)
        expected += [(gr, tp, p, off, md) for gr, tp, p, off, _, md in recs]
        base += len(recs)
    rows, dec = commits_of(buf, chunk_records=4)
    assert [(r["group"], r["topic"], r["partition"], r["current_offset"], r["metadata"]) for r in rows] \
        == expected
    assert dec.skipped_records == 0
    assert struct.calcsize(">h") == 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(commit, min_size=1, max_size=6), min_size=1, max_size=4), st.sampled_from([0, 2, 4]))
def test_agrees_with_the_protocol_packages_reference_decoders(batches_of_commits, codec):
    from kcoord.protocol import consumer_offsets as co
    from kcoord.protocol import records

    buf, base = b"", 0
    for i, recs in enumerate(batches_of_commits):
        built = [commit_record(base + j, gr, tp, p, off, v, metadata=md)
                 for j, (gr, tp, p, off, v, md) in enumerate(recs)]
        if i == 1:
            built.append((base, g.group_metadata_key("grp"), g.group_metadata_value(4, "range", "m", 9, [
                {"member_id": "m", "client_id": "c", "host": "/h", "topics": ["t"], "assignment": {"t": [3]}}]),
                None))
        buf += g.batch(built, base, compression=codec)
        base += len(built)
    theirs, their_groups = [], []
    for offset, key, value in records.iter_key_values(buf):
        k = co.decode_key(key)
        if isinstance(k, co.GroupMetadataKey):
            v = co.decode_group_metadata_value(value)
            their_groups.append((offset, k.group, v.generation, v.leader,
                                 [(m.member_id, m.client_host) for m in v.members]))
            continue
        v = co.decode_offset_commit_value(value)
        theirs.append((offset, k.group, k.topic, k.partition, v.offset, v.metadata, v.commit_timestamp))
    rows, _ = commits_of(buf)
    assert [(r["log_offset"], r["group"], r["topic"], r["partition"], r["current_offset"], r["metadata"],
             r["commit_timestamp"]) for r in rows] == theirs
    ours = [(r[1], r[3], r[7], r[9], [(m[0], m[3]) for m in r[11]]) for r in SegmentDecoder(buf, 0).group_rows()]
    assert ours == their_groups
