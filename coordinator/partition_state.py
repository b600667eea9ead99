"""The materialised state of one `__consumer_offsets` partition: what replaying its records leaves.

Per group: the value of its last GroupMetadata record (raw bytes, decoded when the group is built,
so a load from a checkpoint decodes it exactly as a full replay does) and its live committed
offsets. Tombstones are applied, never kept: a deleted offset or group is simply absent.

`replay(records)` folds records into the state, oldest first. Only the last record of each key
matters, so records are first reduced to the last value per raw key (a dict built in C); each
surviving key and value is then decoded once, and offsets are applied with
`kcoord.coordinator.replay.apply_offset_records`, the function the live path uses. Replaying a log in
two parts (a checkpoint's state, then the tail after it) therefore leaves the same state as
replaying it whole.

A state read from a checkpoint may keep groups undecoded (`undecoded`, with the function that
decodes one): a replay decodes only the groups its records touch, and a checkpoint rewrite copies
the others as they were. So refreshing a checkpoint costs its tail, not the whole partition.
"""
from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterable
from operator import attrgetter, itemgetter

from kcoord.coordinator.consumer.records import record_type as consumer_record_type
from kcoord.coordinator.replay import apply_offset_records
from kcoord.coordinator.share.records import record_type as share_record_type
from kcoord.protocol.consumer_offsets import (
    OffsetCommitValue,
    decode_key,
    decode_offset_commit_value,
    split_offset_commit_key,
)
from kcoord.protocol.errors import DecodeError

_PARTITION = struct.Struct(">i")
Offsets = dict[tuple[str, int], OffsetCommitValue]


class PartitionState:
    __slots__ = ("metadata", "offsets", "undecoded", "_decode_group", "consumer_records", "transactional",
                 "marker_epochs")

    def __init__(self, undecoded: dict | None = None,
                 decode_group: Callable[[str, object], tuple[bytes | None, Offsets]] | None = None) -> None:
        self.metadata: dict[str, bytes] = {}       # group id -> GroupMetadataValue bytes
        self.offsets: dict[str, Offsets] = {}      # group id -> (topic, partition) -> value, never empty
        self.undecoded: dict[str, object] = undecoded or {}  # group id -> its entry in a checkpoint
        # KIP-848 consumer group records (kcoord.coordinator.consumer.records), kept raw: key -> last value
        self.consumer_records: dict[bytes, bytes] = {}
        self._decode_group = decode_group
        # producer id -> its transactional records with no marker yet at the end of the log read (a load
        # makes them pending; never in a checkpoint, whose offset stays before them)
        self.transactional: dict[int, list] = {}
        # producer id -> the coordinator epoch of its last marker read (kcoord.coordinator.txn_offsets' fence)
        self.marker_epochs: dict[int, int] = {}

    def __eq__(self, other) -> bool:  # decodes both first (tests compare states)
        if not isinstance(other, PartitionState):
            return False
        self.decode_all()
        other.decode_all()
        return (self.metadata == other.metadata and self.offsets == other.offsets
                and self.consumer_records == other.consumer_records)

    def __repr__(self) -> str:
        return f"PartitionState({len(self.groups())} groups)"

    def groups(self) -> set[str]:
        return self.metadata.keys() | self.offsets.keys() | self.undecoded.keys()

    def decode_all(self) -> None:
        for group_id in list(self.undecoded):
            self._decode(group_id)

    def decode(self, group_id: str) -> None:
        """Decode one group kept undecoded from a checkpoint (nothing if it is decoded already)."""
        if group_id in self.undecoded:
            self._decode(group_id)

    def _decode(self, group_id: str) -> None:
        metadata, offsets = self._decode_group(group_id, self.undecoded.pop(group_id))
        if metadata is not None:
            self.metadata[group_id] = metadata
        if offsets:
            self.offsets[group_id] = offsets

    def replay(self, records: Iterable, log) -> set[str]:
        """Fold `records` (oldest first: objects with .key and .value, or (key, value[, headers])
        tuples) into the state. Returns the ids of the groups they touched."""
        it = iter(records)
        first = next(it, None)
        if first is None:
            return set()
        get_key_value = attrgetter("key", "value") if hasattr(first, "key") else itemgetter(0, 1)
        return self.replay_latest(dict(map(get_key_value, itertools.chain((first,), it))), log)

    def replay_latest(self, latest: dict, log) -> set[str]:
        """`replay` of records already reduced to the last value per raw key (oldest first)."""
        metadata, offsets, consumer = _decode_latest(latest, log)
        for key, value in consumer.items():
            if value is None:
                self.consumer_records.pop(key, None)
            else:
                self.consumer_records[key] = value
        for group_id in self.undecoded.keys() & (metadata.keys() | offsets.keys()):
            self._decode(group_id)
        for group_id, value in metadata.items():
            if value is None:
                self.metadata.pop(group_id, None)
            else:
                self.metadata[group_id] = value
        for group_id, records_of_group in offsets.items():
            live = apply_offset_records(self.offsets.get(group_id) or {}, records_of_group)
            if live:
                self.offsets[group_id] = live
            else:
                self.offsets.pop(group_id, None)
        return metadata.keys() | offsets.keys()


def _decode_latest(latest: dict, log) -> tuple[dict[str, bytes | None], dict[str, dict], dict[bytes, bytes | None]]:
    """Decode each surviving key once: GroupMetadata values by group, offset records by group; consumer
    group records stay raw (their manager decodes them on load)."""
    metadata: dict[str, bytes | None] = {}
    consumer: dict[bytes, bytes | None] = {}
    offsets_by_group: dict[str, dict[tuple[str, int], OffsetCommitValue | None]] = {}
    # OffsetCommitKey = version, group, topic | partition: the (version, group, topic) prefix repeats
    # for every partition of a topic, so it is split and validated once. The (topic, partition) keys
    # are shared by every group of a topic: fewer objects for the same tables.
    prefixes: dict[bytes, tuple[dict, dict, str]] = {}
    keys_by_topic: dict[str, dict[int, tuple[str, int]]] = {}
    unpack_partition = _PARTITION.unpack_from
    decode_value = decode_offset_commit_value
    for key, value in latest.items():
        try:
            if key[0] == 0 and key[1] <= 1:
                n = len(key) - 4
                known = prefixes.get(key[:n])
                if known is None:
                    raw_group, topic, _ = split_offset_commit_key(key)
                    group_id = raw_group.decode("utf-8")
                    group_offsets = offsets_by_group.get(group_id)
                    if group_offsets is None:
                        group_offsets = offsets_by_group[group_id] = {}
                    known = prefixes[key[:n]] = (group_offsets, keys_by_topic.setdefault(topic, {}), topic)
                # A tombstone stays as None so that replay deletes the offset.
                partition = unpack_partition(key, n)[0]
                tp = known[1].get(partition)
                if tp is None:
                    tp = known[1][partition] = (known[2], partition)
                known[0][tp] = None if value is None else decode_value(value)
                continue
            k = decode_key(key)
        except (DecodeError, UnicodeDecodeError, IndexError, TypeError) as e:
            log.warning("Skipping undecodable __consumer_offsets record: %s", e)
            continue
        if k is not None:  # GroupMetadataKey
            metadata[k.group] = value
        elif consumer_record_type(key) is not None or share_record_type(key) is not None:
            # KIP-848's and KIP-932's group records, kept raw (the shard hands each kind to its manager)
            consumer[bytes(key)] = None if value is None else bytes(value)
    return metadata, offsets_by_group, consumer
