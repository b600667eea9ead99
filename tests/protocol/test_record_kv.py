"""kcoord.protocol.record_kv, the replay's fast (key, value) reader, agrees with the reference decoder."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol import records as r
from kcoord.protocol.record_kv import (
    _fast_key_values,
    _uniform_columns,
    batch_key_values,
    fold_key_values,
    iter_log_key_values,
)


def _uniform_key_values(payload, count):
    columns = _uniform_columns(payload, count)
    return None if columns is None else list(zip(*columns, strict=True))

# Sizes around the fast path's edges: one-byte lengths end at 63, two-byte record lengths at 8191.
sizes = st.sampled_from([0, 1, 30, 63, 64, 100, 4000, 8200])
keys = st.one_of(st.none(), sizes.flatmap(lambda n: st.binary(min_size=n, max_size=n)))
values = st.one_of(st.none(), sizes.flatmap(lambda n: st.binary(min_size=n, max_size=n)))
headers = st.lists(st.tuples(st.sampled_from(["h", "kcoord.rebalance.cause"]), st.one_of(st.none(), st.binary())),
                   max_size=2)
records = st.lists(st.tuples(keys, values, headers, st.integers(0, 10**6)), min_size=1, max_size=20)


def _reference(batch, from_offset=-1):
    return [(k, v) for o, _ts, k, v, _h in r.iter_record_tuples(batch) if o >= from_offset]


@settings(max_examples=200, deadline=None)
@given(records, st.sampled_from([r.NONE, r.GZIP, r.LZ4]), st.integers(0, 100), st.data())
def test_fast_reader_agrees_with_the_reference_decoder(items, codec, base, data):
    batch = r.build_batch([(k, v, h, 1_700_000_000_000 + t) for k, v, h, t in items],
                          base_offset=base, compression=codec)
    header = r.parse_batch_header(batch)
    from_offset = data.draw(st.integers(base - 1, base + len(items)))
    assert batch_key_values(memoryview(batch), header, from_offset) == _reference(batch, from_offset)
    latest = {b"before": b"x"}
    fold_key_values(latest, memoryview(batch), header, from_offset)
    assert latest == {b"before": b"x", **dict(_reference(batch, from_offset))}


def test_coordinator_shaped_records_take_the_fast_path():
    # Keys of ~40 bytes, 24-byte values, tombstones, offset deltas past 63: all inline.
    items = [(b"k" * 40, None if i % 3 == 0 else b"v" * 24) for i in range(200)]
    batch = r.build_batch(items)
    payload = batch[r.RECORDS_OFFSET:]
    assert _fast_key_values(payload, 200) == items


def test_log_reader_skips_control_batches_and_old_records():
    data = (r.build_batch([(b"a", b"1"), (b"b", b"2")], base_offset=0)
            + r.build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], base_offset=2, control=True)
            + r.build_batch([(b"a", b"3")], base_offset=3))
    assert list(iter_log_key_values(data)) == [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")]
    assert list(iter_log_key_values(data, from_offset=1)) == [(b"b", b"2"), (b"a", b"3")]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 80), st.sampled_from([0, 1, 20, 33, 57, 58, 70]), st.sampled_from([0, 1, 24, 30, 70]),
       st.booleans(), st.data())
def test_uniform_reader_agrees_with_the_reference_decoder(count, key_size, value_size, tombstone, data):
    items = [(data.draw(st.binary(min_size=key_size, max_size=key_size)),
              data.draw(st.binary(min_size=value_size, max_size=value_size))) for _ in range(count)]
    if tombstone:
        items[data.draw(st.integers(0, count - 1))] = (b"k" * key_size, None)
    batch = r.build_batch(items)
    got = _uniform_key_values(batch[r.RECORDS_OFFSET:], count)
    assert got is None or got == items
    if count <= 64 and key_size < 64 and value_size < 64 and not tombstone:  # 1-byte key and value lengths
        assert got == items
    assert batch_key_values(memoryview(batch), r.parse_batch_header(batch)) == _reference(batch) == items
    latest = {}
    fold_key_values(latest, memoryview(batch), r.parse_batch_header(batch))
    assert latest == dict(items)


@pytest.mark.parametrize("key_size, length_bytes", [(33, 1), (50, 2)])
def test_uniform_reader_refuses_a_batch_whose_framing_differs_in_one_record(key_size, length_bytes):
    items = [(b"k" * key_size, b"v" * 24) for _ in range(10)]
    payload = r.build_batch(items)[r.RECORDS_OFFSET:]
    stride = len(payload) // 10
    assert _uniform_key_values(payload, 10) == items
    # length, attributes, timestamp delta, offset delta, key length, value length, header count
    h = length_bytes
    for at in (*range(h), h, h + 1, h + 2, h + 3, h + 4 + key_size, stride - 1):
        changed = bytearray(payload)
        changed[6 * stride + at] ^= 2
        assert _uniform_key_values(bytes(changed), 10) is None, at
