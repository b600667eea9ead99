"""Record batch v2: our codec against kafka-python's and aiokafka's builders and readers."""
import struct
import zlib

import cramjam
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AiokafkaBuilder
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

from kcoord.protocol import records as r
from kcoord.protocol.errors import DecodeError

CODECS = [r.NONE, r.GZIP, r.SNAPPY, r.LZ4, r.ZSTD]


def test_header_layout_matches_kafka():
    assert r.HEADER_SIZE == 61
    assert (r.LENGTH_OFFSET, r.PARTITION_LEADER_EPOCH_OFFSET, r.MAGIC_OFFSET) == (8, 12, 16)
    assert (r.CRC_OFFSET, r.ATTRIBUTES_OFFSET, r.MAX_TIMESTAMP_OFFSET) == (17, 21, 35)


def test_crc32c_check_value():
    assert r.crc32c(b"123456789") == 0xE3069283
    assert r.crc32c(memoryview(b"123456789")) == 0xE3069283


def _client_batch(builder_cls, codec, n=50):
    builder = builder_cls(2, codec, False, -1, -1, -1, 1 << 20)
    for i in range(n):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = None if i % 11 == 0 else b"value-%d-" % i * (i % 5)
        headers = [(f"h{j}", b"x" * j) for j in range(i % 3)]
        builder.append(i, 1_700_000_000_000 + i, key, value, headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("builder_cls", [KafkaPythonBuilder, AiokafkaBuilder])
def test_client_built_batches_decode(builder_cls, codec):
    data = _client_batch(builder_cls, codec)
    header = r.parse_batch_header(data)
    assert header.compression == codec
    assert header.size == len(data)
    assert r.verify_crc(data)
    reference = MemoryRecords(data).next_batch()
    expected = [(x.offset, x.timestamp, x.key, x.value, tuple((k, v) for k, v in x.headers))
                for x in reference]
    assert [tuple(rec) for rec in r.decode_records(data)] == expected
    assert header.last_offset == expected[-1][0]
    assert header.records_count == len(expected)


def _recompress(batch: bytes, codec: int, compressed: bytes) -> bytes:
    """Swap an uncompressed batch's records for `compressed` bytes and fix length, attributes and CRC."""
    out = bytearray(batch[:r.HEADER_SIZE]) + compressed
    struct.pack_into(">i", out, r.LENGTH_OFFSET, len(out) - r.LOG_OVERHEAD)
    attributes = struct.unpack_from(">h", out, r.ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", out, r.ATTRIBUTES_OFFSET, attributes | codec)
    struct.pack_into(">I", out, r.CRC_OFFSET, r.batch_crc(out))
    return bytes(out)


def test_raw_snappy_and_xerial_snappy_both_decode():
    plain = r.build_batch([(b"k%d" % i, b"v" * i) for i in range(300)], timestamp_ms=1)
    records = plain[r.HEADER_SIZE:]
    raw = _recompress(plain, r.SNAPPY, bytes(cramjam.snappy.compress_raw(records)))
    xerial = r.build_batch([(b"k%d" % i, b"v" * i) for i in range(300)], compression=r.SNAPPY, timestamp_ms=1)
    assert xerial[r.HEADER_SIZE:r.HEADER_SIZE + 8] == b"\x82SNAPPY\x00"
    assert r.decode_records(raw) == r.decode_records(plain) == r.decode_records(xerial)


def test_xerial_snappy_with_many_blocks():
    values = [bytes([i % 251]) * 1000 for i in range(100)]  # ~100 KB: several 32 KiB blocks
    batch = r.build_batch([(None, v) for v in values], compression=r.SNAPPY, timestamp_ms=1)
    assert [rec.value for rec in r.decode_records(batch)] == values
    assert [x.value for x in MemoryRecords(batch).next_batch()] == values


record_st = st.tuples(
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=200),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
    st.integers(min_value=0, max_value=2**41),
)


@settings(max_examples=60, deadline=None)
@given(records=st.lists(record_st, min_size=1, max_size=20), codec=st.sampled_from(CODECS),
       base_offset=st.integers(min_value=0, max_value=2**62))
def test_our_batches_read_back_by_kafka_python(records, codec, base_offset):
    batch = r.build_batch(records, base_offset=base_offset, compression=codec)
    reference = MemoryRecords(batch).next_batch()
    assert reference.validate_crc()
    got = [(x.offset, x.timestamp, x.key, x.value, [tuple(h) for h in x.headers]) for x in reference]
    assert got == [(base_offset + i, ts, k, v, [tuple(h) for h in hs]) for i, (k, v, hs, ts) in enumerate(records)]
    ours = r.decode_records(batch)
    assert [(x.offset, x.timestamp, x.key, x.value, list(x.headers)) for x in ours] == \
        [(a, b, c, d, e) for a, b, c, d, e in got]


def test_patching_offset_and_epoch_keeps_crc_and_records():
    batch = bytearray(r.build_batch([(b"a", b"1"), (b"b", b"2")], compression=r.LZ4, timestamp_ms=7))
    records_before = bytes(batch[r.ATTRIBUTES_OFFSET:])
    r.set_base_offset(batch, 1234)
    r.set_partition_leader_epoch(batch, 9)
    assert bytes(batch[r.ATTRIBUTES_OFFSET:]) == records_before
    assert r.verify_crc(batch)
    header = r.parse_batch_header(batch)
    assert (header.base_offset, header.partition_leader_epoch, header.last_offset) == (1234, 9, 1235)
    assert [x.offset for x in r.decode_records(batch)] == [1234, 1235]


def test_log_append_time_rewrites_max_timestamp_and_crc():
    batch = bytearray(r.build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=7))
    r.set_log_append_time(batch, 99_000)
    header = r.parse_batch_header(batch)
    assert header.timestamp_type == r.LOG_APPEND_TIME and header.max_timestamp == 99_000
    assert r.verify_crc(batch)
    assert [x.timestamp for x in r.decode_records(batch)] == [99_000, 99_000]
    assert [x.timestamp for x in MemoryRecords(bytes(batch)).next_batch()] == [99_000, 99_000]


def test_compacted_shape_keeps_gaps_span_and_delete_horizon():
    kept = [r.Record(105, 50, b"k", None, ()), r.Record(108, 60, b"j", b"v", ())]
    batch = r.build_batch(kept, base_offset=100, last_offset_delta=9, delete_horizon_ms=1000)
    header = r.parse_batch_header(batch)
    assert (header.base_offset, header.last_offset, header.delete_horizon_ms) == (100, 109, 1000)
    assert r.decode_records(batch) == kept


def test_iter_batches_stops_at_every_torn_tail():
    batches = [r.build_batch([(b"k", b"v" * i)], base_offset=i, timestamp_ms=i) for i in range(3)]
    buf = b"".join(batches)
    whole = len(batches[0]) + len(batches[1])
    for cut in range(whole, len(buf)):
        assert [h.base_offset for _, h, _ in r.iter_batches(buf[:cut])] == [0, 1]
    assert [p for p, _, _ in r.iter_batches(buf)] == [0, len(batches[0]), whole]


def test_iter_batches_verify_detects_flipped_bit():
    batch = bytearray(r.build_batch([(b"k", b"value")], timestamp_ms=1))
    batch[-1] ^= 0x01
    assert not r.verify_crc(batch)
    with pytest.raises(DecodeError):
        list(r.iter_batches(batch, verify=True))


def test_iter_key_values_skips_control_batches():
    data = (r.build_batch([(b"a", b"1"), (b"b", None)], base_offset=0, timestamp_ms=1)
            + r.build_batch([(b"\x00\x00\x00\x00", b"")], base_offset=2, control=True, timestamp_ms=1)
            + r.build_batch([(None, b"3")], base_offset=3, compression=r.GZIP, timestamp_ms=1))
    assert list(r.iter_key_values(data)) == [(0, b"a", b"1"), (1, b"b", None), (3, None, b"3")]


def test_corrupt_compressed_payload_is_a_decode_error():
    plain = r.build_batch([(b"k", b"v" * 100)], timestamp_ms=1)
    for codec in (r.GZIP, r.SNAPPY, r.LZ4, r.ZSTD):
        bad = _recompress(plain, codec, b"\x00garbage-not-compressed" * 3)
        with pytest.raises(DecodeError):
            r.decode_records(bad)
    truncated_gzip = _recompress(plain, r.GZIP, zlib.compress(b"abc", wbits=31)[:-6])
    with pytest.raises(DecodeError):
        r.decode_records(truncated_gzip)


def _decode_everything(data):
    for _, _header, batch in r.iter_batches(data, verify=False):
        r.decode_records(batch)
    r.decode_records(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_only_raises_decode_error(data):
    try:
        _decode_everything(data)
    except DecodeError:
        pass


_SEED = r.build_batch([(b"key", b"value", [("h", b"x")]), (None, None)], timestamp_ms=5)


@settings(max_examples=300, deadline=None)
@given(position=st.integers(min_value=r.ATTRIBUTES_OFFSET, max_value=len(_SEED) - 1),
       byte=st.integers(min_value=0, max_value=255), codec=st.sampled_from(CODECS))
def test_mutated_records_only_raise_decode_error(position, byte, codec):
    # Mutate past the CRC and recompute it, so decoding really walks the damaged records.
    seed = bytearray(r.build_batch([(b"key", b"value", [("h", b"x")]), (None, None)],
                                   compression=codec, timestamp_ms=5))
    seed[min(position, len(seed) - 1)] = byte
    struct.pack_into(">I", seed, r.CRC_OFFSET, r.batch_crc(seed))
    try:
        _decode_everything(bytes(seed))
    except DecodeError:
        pass


def test_lz4_frames_use_independent_blocks_as_java_requires():
    batch = r.build_batch([(None, b"x" * 100_000), (None, b"y" * 100_000)], compression=r.LZ4, timestamp_ms=1)
    frame = batch[r.HEADER_SIZE:]
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flags = frame[4]
    assert flags >> 6 == 1  # frame format version 01
    assert flags & 0x20  # block independence: KafkaLZ4BlockInputStream refuses linked blocks
    assert [len(x.value) for x in MemoryRecords(batch).next_batch()] == [100_000, 100_000]


def test_decodes_frame_variants_other_producers_send():
    import lz4.frame
    import zstandard

    records = [(b"k%d" % i, b"v" * (i % 300)) for i in range(400)]
    plain = r.build_batch(records, timestamp_ms=1)
    payload = plain[r.HEADER_SIZE:]
    variants = [
        (r.ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(payload)),  # streaming
        (r.LZ4, lz4.frame.compress(payload, block_linked=True, content_checksum=True, store_size=False)),
        (r.LZ4, lz4.frame.compress(payload, block_linked=False, store_size=True)),
        (r.GZIP, zlib.compress(payload, wbits=31)),
    ]
    for codec, compressed in variants:
        assert r.decode_records(_recompress(plain, codec, compressed)) == r.decode_records(plain)
