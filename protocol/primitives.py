"""Kafka wire primitives: precompiled big-endian structs, varints, and the slow paths that generated
codecs call out to (multi-byte varints, tagged-field sections).

Generated decoders inline the common cases (fixed-width runs, one-byte varints); everything here is
bounds-checked and raises DecodeError with the byte offset, never IndexError or struct.error.
"""
from __future__ import annotations

import struct

from kcoord.protocol.errors import DecodeError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

# One-byte unsigned varints 0..127, so encoders skip a call for the common small lengths.
UVARINT_1BYTE = tuple(bytes((i,)) for i in range(128))

# Compact length prefixes (n + 1) of 0..126 items, indexed by n.
COMPACT_LENGTHS = UVARINT_1BYTE[1:]

# Pre-packed int16 / int32 length prefixes for the common short lengths (encoders index these).
LENGTH_TABLE_SIZE = 1024
LENGTHS_INT16 = tuple(INT16.pack(n) for n in range(LENGTH_TABLE_SIZE))
LENGTHS_INT32 = tuple(INT32.pack(n) for n in range(LENGTH_TABLE_SIZE))

NULL_INT16 = b"\xff\xff"          # null string (non-compact)
NULL_INT32 = b"\xff\xff\xff\xff"  # null bytes / array (non-compact)
EMPTY_TAGS = b"\x00"              # an empty tagged-field section

_STRUCT_CACHE: dict[str, struct.Struct] = {}


def fixed_struct(fmt: str) -> struct.Struct:
    """A cached big-endian Struct for a run of fixed-width fields, e.g. "hiq"."""
    s = _STRUCT_CACHE.get(fmt)
    if s is None:
        s = _STRUCT_CACHE[fmt] = struct.Struct(">" + fmt)
    return s


# Layouts guessed by generated codecs for arrays of flat structs (codegen shaped loops), by format.
_SHAPES: dict[str, struct.Struct] = {}
_SHAPES_MAX = 512


def shape(fmt: str) -> struct.Struct:
    """The Struct of a guessed element layout such as ">h40sh0si42s" (bounded cache)."""
    hit = _SHAPES.get(fmt)
    if hit is None:
        if len(_SHAPES) >= _SHAPES_MAX:   # lengths vary without bound; keep the cache small
            _SHAPES.clear()
        hit = _SHAPES[fmt] = struct.Struct(fmt)
    return hit


def _read_unsigned(buf, pos: int, max_shift: int, what: str) -> tuple[int, int]:
    value = 0
    shift = 0
    end = len(buf)
    start = pos
    while True:
        if pos >= end:
            raise DecodeError(f"truncated {what}", offset=start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > max_shift:
            raise DecodeError(f"{what} is too long", offset=start)


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Unsigned varint (at most 5 bytes, as Kafka's ByteUtils.readUnsignedVarint) -> (value, next pos)."""
    # One- and two-byte varints (below 16384: lengths of records up to 16 KB) skip the loop.
    if pos + 1 < len(buf):
        b0 = buf[pos]
        if b0 < 0x80:
            return b0, pos + 1
        b1 = buf[pos + 1]
        if b1 < 0x80:
            return (b0 & 0x7F) | (b1 << 7), pos + 2
    return _read_unsigned(buf, pos, 28, "varint")


def read_uvarlong(buf, pos: int) -> tuple[int, int]:
    """Unsigned varlong (at most 10 bytes) -> (value, next pos)."""
    return _read_unsigned(buf, pos, 63, "varlong")


def read_compact_length(buf, pos: int) -> tuple[int, int]:
    """A compact string/bytes/array length (unsigned varint N+1) -> (N, next pos); N = -1 is null."""
    value, pos = read_uvarint(buf, pos)
    return value - 1, pos


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint (int32)."""
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Zig-zag signed varlong (int64)."""
    v, pos = read_uvarlong(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def uvarint_bytes(value: int) -> bytes:
    """Unsigned varint encoding of a non-negative int."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"unsigned varint cannot hold {value}")
        return UVARINT_1BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_bytes(value: int) -> bytes:
    """Zig-zag signed varint (int32) encoding."""
    return uvarint_bytes(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong_bytes(value: int) -> bytes:
    """Zig-zag signed varlong (int64) encoding."""
    return uvarint_bytes(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def compact_length(n: int) -> bytes:
    """Length prefix of a compact string/bytes/array holding n items (n+1; 0 means null)."""
    n += 1
    if n < 0x80:
        return UVARINT_1BYTE[n]
    if n < 0x4000:  # two bytes: the common case for records of a few hundred bytes to 16 KB
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    return uvarint_bytes(n)


# Recently encoded strings with their length prefix (int16, or compact), for generated encoders. Only
# short strings are kept, and a full cache starts over: bounded memory whatever the traffic.
STRING_CACHE_SIZE = 4096
STRING_CACHE_MAX_CHARS = 256
STRINGS16: dict[str, bytes] = {}
STRINGS_COMPACT: dict[str, bytes] = {}


def string16(s: str, field: str, version: int) -> bytes:
    """A present string with its int16 length prefix (cache miss path)."""
    if s is None:
        raise not_nullable(field, version)
    data = s.encode()
    n = len(data)
    out = (LENGTHS_INT16[n] if n < LENGTH_TABLE_SIZE else INT16.pack(n)) + data
    if len(s) <= STRING_CACHE_MAX_CHARS:
        if len(STRINGS16) >= STRING_CACHE_SIZE:   # a full cache starts over: bounded memory
            STRINGS16.clear()
        STRINGS16[s] = out
    return out


def string_compact(s: str, field: str, version: int) -> bytes:
    """A present string with its compact length prefix (cache miss path)."""
    if s is None:
        raise not_nullable(field, version)
    data = s.encode()
    n = len(data)
    out = (COMPACT_LENGTHS[n] if n < 127 else compact_length(n)) + data
    if len(s) <= STRING_CACHE_MAX_CHARS:
        if len(STRINGS_COMPACT) >= STRING_CACHE_SIZE:
            STRINGS_COMPACT.clear()
        STRINGS_COMPACT[s] = out
    return out


def encode_tag_section(known: list[tuple[int, bytes]] | None, unknown: dict[int, bytes] | None) -> bytes:
    """A tagged-field section: count, then (tag, size, bytes) in ascending tag order.

    `known` are the message's own tagged fields that differ from their defaults; `unknown` are raw
    fields kept from decoding, re-emitted as they arrived.
    """
    fields = list(known or ())
    if unknown:
        fields.extend(unknown.items())
        fields.sort(key=lambda kv: kv[0])
    parts = [uvarint_bytes(len(fields))]
    for tag, data in fields:
        parts.append(uvarint_bytes(tag))
        parts.append(uvarint_bytes(len(data)))
        parts.append(bytes(data))
    return b"".join(parts)


def keep_unknown_tag(obj, tag: int, data: bytes) -> None:
    """Keep a tagged field this version does not define, so re-encoding writes it back."""
    unknown = obj._unknown_tagged_fields
    if unknown is None:
        unknown = obj._unknown_tagged_fields = {}
    unknown[tag] = data


def read_unknown_tags(buf, pos: int, obj) -> int:
    """A tagged-field section of a struct that defines no tagged fields: keep them all."""
    count, pos = read_uvarint(buf, pos)
    end = len(buf)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if size > end - pos:
            raise DecodeError(f"tagged field {tag} of {size} bytes exceeds the {end - pos} remaining",
                              offset=pos)
        keep_unknown_tag(obj, tag, bytes(buf[pos:pos + size]))
        pos += size
    return pos


def skip_tag_section(buf, pos: int) -> int:
    """Skip a tagged-field section whose fields we do not keep (e.g. request header v2)."""
    count, pos = read_uvarint(buf, pos)
    end = len(buf)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos + size > end:
            raise DecodeError(f"tagged field of {size} bytes exceeds the {end - pos} remaining", offset=pos)
        pos += size
    return pos


# Helpers that generated codecs call on their error paths (kept out of the generated text).

def null_error(field: str, pos: int) -> DecodeError:
    return DecodeError(f"non-nullable field {field} is null", offset=pos)


def overrun(field: str, need: int, remaining: int, pos: int) -> DecodeError:
    return DecodeError(f"{field}: length {need} exceeds the {remaining} bytes remaining", offset=pos)


def past_end(pos: int, end: int) -> DecodeError:
    return DecodeError(f"a length prefix runs {pos - end} bytes past the end of the message", offset=end)


def tag_size_error(field: str, size: int, pos: int) -> DecodeError:
    return DecodeError(f"tagged field {field} does not fill its {size} bytes", offset=pos)


def not_nullable(field: str, version: int) -> ValueError:
    return ValueError(f"field {field} is not nullable in version {version}")
