"""CRC-32C (google-crc32c, the fast path) against crcmod's crc-32c, an independent pure-table
implementation: random buffers, the check value, and batches built by kcoord.protocol.records. Every batch a
real server writes during the suite is checked the same way by the server fixtures
(tests/support/crc_reference.py)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.records import (
    ATTRIBUTES_OFFSET,
    GZIP,
    NONE,
    batch_crc,
    build_batch,
    crc32c,
    parse_batch_header,
)
from tests.support.crc_reference import crc32c_reference


def test_check_value():
    # The CRC-32C check value of "123456789" (RFC 3720, appendix B.4).
    assert crc32c(b"123456789") == crc32c_reference(b"123456789") == 0xE3069283


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=70_000))
def test_random_buffers_agree(data):
    assert crc32c(data) == crc32c_reference(data)
    assert crc32c(memoryview(data)) == crc32c_reference(data)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=64)), st.binary(max_size=2000)),
                min_size=1, max_size=20),
       st.sampled_from([NONE, GZIP]))
def test_built_batches_carry_the_reference_crc(records, compression):
    batch = build_batch(records, compression=compression)
    header = parse_batch_header(batch)
    assert header.crc == batch_crc(batch) == crc32c_reference(batch[ATTRIBUTES_OFFSET:])


def test_the_data_dir_check_finds_a_wrong_crc(tmp_path):
    from kcoord.storage import PartitionLog
    from tests.support.crc_reference import batch_crc_mismatches

    log = PartitionLog(str(tmp_path / "t-0"), "t", 0)
    log.append(build_batch([(b"k", b"v")]))
    log.append(build_batch([(b"k", b"w")]))
    log.close()
    assert batch_crc_mismatches(tmp_path) == []
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    second = parse_batch_header(data).size
    data[second + ATTRIBUTES_OFFSET - 1] ^= 0xFF  # the second batch's stored CRC
    segment.write_bytes(bytes(data))
    assert [p.split(":")[0] for p in batch_crc_mismatches(tmp_path)] == ["t-0@1"]
