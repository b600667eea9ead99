"""Checkpoint of a `__consumer_offsets` partition's materialised state: encode, decode, validate.

A checkpoint is only a shortcut: it holds what replaying the partition's log up to (excluding)
`offset` left (kcoord.coordinator.partition_state), so a load replays just the tail from `offset`. The
log stays the source of truth: any doubt about a checkpoint (CRC, format, partition, an offset
outside the log) raises CheckpointError and the caller replays the whole log instead.

Layout: a fixed header, then a marshal payload. The CRC-32C covers the header fields after it
and the payload, so a torn or altered file fails it.

    magic 8s | crc uint32 | format uint16 | marshal version uint8 | little-endian uint8 |
    partition int32 | offset int64 | written_ms int64 | payload length uint32 | payload

`written_ms` (wall clock when the log was read) lets a loader refuse a checkpoint older than the
partition's delete.retention.ms allows: compaction drops a tombstone once it is that old, and a
tombstone written after the checkpoint must still be in the log for the tail replay to see it.

The payload is (groups, consumer group records): the records as (key, value) byte pairs (KIP-848's,
kept raw); groups a tuple of `(group_id, metadata bytes | None, topics)`, each topic
`(topic, partitions, offsets, leader_epochs, commit_timestamps, expire_timestamps, metadata,
topic_ids)`: partitions are native `array` bytes; every other column is either that (numbers) or a
tuple (strings), or, when all its entries are equal (often: one commit stamps all of a group's
partitions), that one value. So a load turns a million offsets into Python objects in C
(array.tolist, itertools.repeat, zip, map over tuple.__new__).
"""
from __future__ import annotations

import marshal
import struct
import sys
from array import array
from functools import partial
from itertools import repeat
from typing import NamedTuple

from kcoord.coordinator.partition_state import PartitionState
from kcoord.protocol.consumer_offsets import OffsetCommitValue
from kcoord.protocol.records import crc32c

MAGIC = b"KCGRPCK\x00"
FORMAT_VERSION = 2  # 2: the payload is (groups, consumer group records); 1 (groups only) is still read
_HEADER = struct.Struct(
    ">8s"  # magic
    "I"    # CRC-32C of everything after this field
    "H"    # format version
    "B"    # marshal version of the payload
    "B"    # 1 if the arrays in the payload are little-endian
    "i"    # partition of __consumer_offsets
    "q"    # offset: the state is the replay of every record below it
    "q"    # written_ms: wall clock when the log up to offset was read
    "I"    # payload length
)
_CRC_START = 12  # magic + crc
_LITTLE = 1 if sys.byteorder == "little" else 0
_MARSHAL_VERSION = 4
_new_value = partial(tuple.__new__, OffsetCommitValue)


class CheckpointError(Exception):
    """The checkpoint cannot be trusted; the message says why."""


class Checkpoint(NamedTuple):
    offset: int
    written_ms: int
    state: PartitionState


def encode(state: PartitionState, partition: int, offset: int, written_ms: int) -> bytes:
    groups = []
    for group_id in sorted(state.groups()):
        undecoded = state.undecoded.get(group_id)
        if undecoded is not None:  # untouched since the checkpoint it came from: as it was
            groups.append((group_id, *undecoded))
            continue
        topics = []
        by_topic: dict[str, list] = {}
        for (topic, p), value in state.offsets.get(group_id, {}).items():
            by_topic.setdefault(topic, []).append((p, value))
        for topic, entries in by_topic.items():
            partitions, values = zip(*entries, strict=True)
            offsets, metadata, commit_ts, epochs, expire_ts, topic_ids = zip(*values, strict=True)
            topics.append((topic, array("i", partitions).tobytes(), _pack("q", offsets), _pack("i", epochs),
                           _pack("q", commit_ts), _pack("q", expire_ts), _pack(None, metadata),
                           _pack(None, topic_ids)))
        groups.append((group_id, state.metadata.get(group_id), tuple(topics)))
    payload = marshal.dumps((tuple(groups), tuple(state.consumer_records.items())), _MARSHAL_VERSION)
    fields = (FORMAT_VERSION, _MARSHAL_VERSION, _LITTLE, partition, offset, written_ms, len(payload))
    crc = crc32c(_HEADER.pack(MAGIC, 0, *fields)[_CRC_START:] + payload)
    return _HEADER.pack(MAGIC, crc, *fields) + payload


def read_header(data: bytes, partition: int) -> tuple[int, int]:
    """Check everything but the payload's contents; returns (offset, written_ms)."""
    if len(data) < _HEADER.size:
        raise CheckpointError(f"{len(data)} bytes, shorter than a header")
    magic, crc, version, marshal_version, little, stored_partition, offset, written_ms, length = \
        _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointError("not a checkpoint (bad magic)")
    if len(data) != _HEADER.size + length:
        raise CheckpointError(f"torn: {len(data) - _HEADER.size} payload bytes, header says {length}")
    if crc32c(memoryview(data)[_CRC_START:]) != crc:
        raise CheckpointError("CRC mismatch")
    if version not in (1, FORMAT_VERSION) or marshal_version != _MARSHAL_VERSION or little != _LITTLE:
        raise CheckpointError(f"unknown format (version {version}, marshal {marshal_version}, little {little})")
    if stored_partition != partition:
        raise CheckpointError(f"written for partition {stored_partition}")
    if offset < 0:
        raise CheckpointError(f"negative offset {offset}")
    return offset, written_ms


def decode(data: bytes, partition: int, lazy: bool = False) -> Checkpoint:
    """The checkpoint in `data`; CheckpointError if anything about it is off. With `lazy`, groups
    stay undecoded until a replay touches them (a checkpoint refresh); a problem inside one then
    surfaces as CheckpointError at that point."""
    offset, written_ms = read_header(data, partition)
    try:
        payload = marshal.loads(memoryview(data)[_HEADER.size:])
        groups, consumer = (payload, ()) if _HEADER.unpack_from(data)[2] == 1 else payload
        state = PartitionState({group_id: (metadata, topics) for group_id, metadata, topics in groups},
                               partial(_decode_group, {}))
        state.consumer_records = {bytes(k): bytes(v) for k, v in consumer}
        if not lazy:
            state.decode_all()
    except CheckpointError:
        raise
    except Exception as exc:  # a payload that passed the CRC but is not what encode writes
        raise CheckpointError(f"malformed payload: {exc!r}") from exc
    return Checkpoint(offset, written_ms, state)


def _decode_group(keys_cache: dict, group_id: str, entry) -> tuple[bytes | None, dict]:
    metadata, topics = entry
    if not topics and metadata is None:
        raise CheckpointError(f"group {group_id!r} with neither metadata nor offsets")
    try:
        return (None if metadata is None else bytes(metadata)), _offsets(topics, keys_cache)
    except CheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(f"malformed group {group_id!r}: {exc!r}") from exc


def _offsets(topics, keys_cache: dict) -> dict:
    table: dict = {}
    for topic, partitions, offsets, epochs, commit_ts, expire_ts, metadata, topic_ids in topics:
        if not isinstance(topic, str):
            raise CheckpointError("topic is not a string")
        # Groups consuming the same partitions of a topic share one tuple of (topic, partition) keys:
        # a million offsets over a few topics then cost far fewer key objects.
        keys = keys_cache.get((topic, partitions))
        if keys is None:
            column = _column("i", partitions)
            keys = keys_cache[(topic, partitions)] = tuple(zip(repeat(topic, len(column)), column, strict=True))
        n = len(keys)
        # strict zips: columns of different lengths raise ValueError (a malformed payload)
        columns = (_unpack("q", offsets, n), _unpack(None, metadata, n), _unpack("q", commit_ts, n),
                   _unpack("i", epochs, n), _unpack("q", expire_ts, n), _unpack(None, topic_ids, n))
        table.update(zip(keys, map(_new_value, zip(*columns, strict=True)), strict=True))
    return table


def _pack(typecode: str | None, values: tuple):
    """One value if all are equal, else native array bytes (numbers) or the tuple (strings)."""
    if values.count(values[0]) == len(values):
        return values[0]
    return values if typecode is None else array(typecode, values).tobytes()


def _unpack(typecode: str | None, column, n: int):
    if typecode is None:
        return column if isinstance(column, tuple) else repeat(column, n)
    return repeat(column, n) if isinstance(column, int) else _column(typecode, column)


def _column(typecode: str, data: bytes) -> list[int]:
    column = array(typecode)
    column.frombytes(data)
    return column.tolist()
