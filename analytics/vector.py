"""Vectorised primitives: read many varints / big-endian integers / strings at once from a uint8 array.

Each function takes the arena (a padded uint8 numpy array) and an int64 array of positions and
returns one value per position, so a whole segment's records are decoded with a few numpy passes
instead of one Python call per field per record.
"""
import numpy as np
import pyarrow as pa

PAD = 16          # bytes of zeros after the data so fixed-width reads near the end stay in bounds


def padded(data: bytes) -> np.ndarray:
    a = np.zeros(len(data) + PAD, dtype=np.uint8)
    a[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    return a


def varint(a: np.ndarray, pos: np.ndarray, zigzag=True):
    """(value, size) of the (zig-zag) varint at each position; at most 10 bytes are read."""
    pos = np.clip(pos, 0, len(a) - 1)
    b = a[pos].astype(np.uint64)
    value = b & np.uint64(0x7F)
    size = np.ones(len(pos), dtype=np.int64)
    todo = np.flatnonzero(b >= 0x80)
    shift = 7
    while todo.size and shift < 70:
        b = a[np.minimum(pos[todo] + size[todo], len(a) - 1)].astype(np.uint64)
        value[todo] |= (b & np.uint64(0x7F)) << np.uint64(shift)
        size[todo] += 1
        todo = todo[b >= 0x80]
        shift += 7
    if zigzag:
        value = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
    else:
        value = value.astype(np.int64)
    return value, size


def be_int(a: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Signed big-endian integers of `width` bytes (2, 4 or 8) at each position, as int64."""
    pos = np.clip(pos, 0, len(a) - width)                 # garbage positions read junk, not raise
    raw = np.lib.stride_tricks.sliding_window_view(a, width)[pos]   # (n, width) copy, no index matrix
    return raw.view(f">i{width}").reshape(-1).astype(np.int64)


def strings(a: np.ndarray, pos: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A UTF-8 string array from byte ranges; a negative length (null in Kafka) becomes ""."""
    lengths = np.maximum(lengths, 0)
    offsets = np.zeros(len(pos) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.repeat(pos - offsets[:-1], lengths) + np.arange(offsets[-1])
    data = a[index]
    binary = pa.Array.from_buffers(pa.large_binary(), len(pos),
                                   [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return binary.cast(pa.large_string()).cast(pa.string())   # the cast checks the UTF-8
