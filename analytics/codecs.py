"""Decompression of a record batch's records block (attributes bits 0-2).

Kafka compresses all records of a batch as one block. gzip is a gzip stream, snappy is
snappy-java's "xerial" framing (a 16-byte header, then int32-length-prefixed raw blocks) or a bare
raw block, lz4 is the LZ4 frame format, zstd a zstd frame.
"""
import struct
import zlib

import cramjam

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16          # magic (8) + version int32 + compatible-version int32
_BLOCK_LEN = struct.Struct(">i")


class UnsupportedCompression(ValueError):
    pass


def _snappy(data) -> bytes:
    data = bytes(data)
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out, pos = [], _XERIAL_HEADER
    while pos + 4 <= len(data):
        (n,) = _BLOCK_LEN.unpack_from(data, pos)
        pos += 4
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos:pos + n])))
        pos += n
    return b"".join(out)


def decompress(codec: int, data) -> bytes:
    """The records block of a batch, uncompressed. `data` is bytes or a memoryview."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return zlib.decompress(data, wbits=47)   # 32 + 15: accept a gzip or zlib header
    if codec == SNAPPY:
        return _snappy(data)
    if codec == LZ4:
        return bytes(cramjam.lz4.decompress(bytes(data)))
    if codec == ZSTD:
        return bytes(cramjam.zstd.decompress(bytes(data)))
    raise UnsupportedCompression(f"compression codec {codec}")
