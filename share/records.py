"""KIP-932's `__share_group_state` records, in Kafka's formats, and which partition of that topic keeps
a share-partition's state.

Two record types, keyed alike by (group id, topic id, partition) -- the key's int16 version is the
record type, as for the group coordinator's records:

    0  ShareSnapshot   value: the whole durable state of a share-partition -- snapshot, state and leader
                       epochs, start offset, its state batches, when it was created and written
    1  ShareUpdate     value: what one write changed -- the start offset and the changed state batches,
                       at the snapshot epoch it applies on top of

A state batch is [first offset, last offset] with a delivery state (0 AVAILABLE, 2 ACKNOWLEDGED,
4 ARCHIVED: ACQUIRED is never written) and a delivery count. Values are version 0, flexible; the
definitions (share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json)
are in protocol/extra_definitions.py. Kafka 4.1 made SnapshotEpoch an int32 and added the snapshot's
Create/WriteTimestamp; Kafka 4.2 (KIP-1226) added DeliveryCompleteCount, declared there as tagged field 0
(default -1) of both values: a record without it reads as -1 ("not known"), as Kafka's does.
"""
from __future__ import annotations

import base64
import functools
import uuid
from typing import NamedTuple

from kcoord.protocol import messages as m
from kcoord.protocol.consumer_offsets import java_string_hash
from kcoord.protocol.errors import DecodeError

SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1
_NAMES = {SHARE_SNAPSHOT: "ShareSnapshot", SHARE_UPDATE: "ShareUpdate"}

# Delivery states as written (SharePartition.RecordState ids); 1 (ACQUIRED) lives only in memory.
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
DURABLE_STATES = frozenset((AVAILABLE, ACKNOWLEDGED, ARCHIVED))
UNKNOWN_DELIVERY_COMPLETE_COUNT = -1  # ShareGroupOffset.UNINITIALIZED_DELIVERY_COMPLETE_COUNT


class StateBatch(NamedTuple):
    """Offsets first..last (inclusive) in one delivery state with one delivery count
    (Kafka's PersisterStateBatch)."""
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class ShareStateRecord(NamedTuple):
    """A decoded __share_group_state record: its type, key and value fields. `state_epoch`,
    `create_timestamp` and `write_timestamp` are a snapshot's only (None in an update)."""
    type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT
    state_epoch: int | None = None
    create_timestamp: int | None = None
    write_timestamp: int | None = None


class ShareWrite(tuple):
    """A record this side builds: (key, value, headers) as the log gets it, `.decoded` (what its bytes
    decode to) and `.transition`, the id of the state change whose durability its replay confirms
    (SharePartition.replay). A load decodes the bytes and has no transition."""

    decoded: ShareStateRecord
    transition: int | None


# ---------------------------------------------------------------- which partition of __share_group_state

def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: "groupId:topicId:partition", the topic id as Kafka
    prints a Uuid (URL-safe base64 of its 16 bytes, no padding). FindCoordinator key type 2 carries it."""
    return f"{group_id}:{uuid_string(topic_id)}:{partition}"


def uuid_string(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def partition_for_key(key: str, partitions: int) -> int:
    """ShareCoordinatorService.partitionFor: Utils.abs(key.hashCode()) % partitions, where
    abs(Integer.MIN_VALUE) is 0."""
    h = java_string_hash(key)
    return (0 if h == -0x80000000 else abs(h)) % partitions


def share_state_partition(group_id: str, topic_id: uuid.UUID, partition: int, partitions: int) -> int:
    """The partition of __share_group_state that keeps this share-partition's state (the topic's
    `share.coordinator.state.topic.num.partitions`, Kafka's default 50)."""
    return partition_for_key(coordinator_key(group_id, topic_id, partition), partitions)


# ---------------------------------------------------------------- encode / decode

@functools.lru_cache(maxsize=1 << 12)
def _key(rtype: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    name = _NAMES[rtype] + "Key"
    return m.encode_versioned(name, m.message_class(name)(group_id=group_id, topic_id=topic_id,
                                                          partition=partition), rtype)


def snapshot_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    """The ShareSnapshot key of a share-partition: with a null value, the tombstone that deletes its state
    (DeleteShareGroupState)."""
    return _key(SHARE_SNAPSHOT, group_id, topic_id, partition)


def deleted(key, value) -> tuple[str, uuid.UUID, int] | None:
    """The share-partition (group id, topic id, partition) a tombstone deletes -- its ShareSnapshot key
    with a null value (DeleteShareGroupState) -- or None for any other record."""
    if value is not None or record_type(key) != SHARE_SNAPSHOT:
        return None
    k, _ = m.decode_versioned("ShareSnapshotKey", key)
    return k.group_id, k.topic_id, k.partition


def record_type(key) -> int | None:
    """The share-state record type of a raw key, or None for anything else."""
    if len(key) < 2:
        return None
    version = int.from_bytes(key[:2], "big", signed=True)
    return version if version in _NAMES else None


def state_batches(batches) -> tuple[StateBatch, ...]:
    """A message's StateBatches (a record value's, or a share-state RPC's) as StateBatch."""
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in batches)


def message_batches(cls, batches) -> list:
    """StateBatch as the StateBatches of message class `cls` (a record value or a share-state RPC)."""
    return [cls.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                           delivery_state=b.delivery_state, delivery_count=b.delivery_count) for b in batches]


def encode(record: ShareStateRecord, transition: int | None = None) -> ShareWrite:
    """The (key, value, headers) of a record, carrying what it decodes to."""
    name = _NAMES[record.type] + "Value"
    cls = m.message_class(name)
    if record.type == SHARE_SNAPSHOT:
        value = cls(snapshot_epoch=record.snapshot_epoch, state_epoch=record.state_epoch,
                    leader_epoch=record.leader_epoch, start_offset=record.start_offset,
                    delivery_complete_count=record.delivery_complete_count,
                    create_timestamp=record.create_timestamp, write_timestamp=record.write_timestamp,
                    state_batches=message_batches(cls, record.state_batches))
    else:
        value = cls(snapshot_epoch=record.snapshot_epoch, leader_epoch=record.leader_epoch,
                    start_offset=record.start_offset, delivery_complete_count=record.delivery_complete_count,
                    state_batches=message_batches(cls, record.state_batches))
    out = ShareWrite((_key(record.type, record.group_id, record.topic_id, record.partition),
                      m.encode_versioned(name, value, 0), ()))
    out.decoded = record
    out.transition = transition
    return out


def decode(key, value) -> ShareStateRecord:
    """Decode a share-state record (DecodeError if it is not one). Kafka never deletes share state with a
    tombstone of these keys in 4.2's write path; a null value is refused here."""
    rtype = record_type(key)
    if rtype is None or value is None:
        raise DecodeError("not a share-state record", api="ShareStateRecord", offset=0)
    k, _ = m.decode_versioned(_NAMES[rtype] + "Key", key)
    v, _ = m.decode_versioned(_NAMES[rtype] + "Value", value)
    batches = state_batches(v.state_batches)
    if rtype == SHARE_SNAPSHOT:
        return ShareStateRecord(rtype, k.group_id, k.topic_id, k.partition, v.snapshot_epoch, v.leader_epoch,
                                v.start_offset, batches, v.delivery_complete_count, v.state_epoch,
                                v.create_timestamp, v.write_timestamp)
    return ShareStateRecord(rtype, k.group_id, k.topic_id, k.partition, v.snapshot_epoch, v.leader_epoch,
                            v.start_offset, batches, v.delivery_complete_count)


def decoded(record) -> ShareStateRecord:
    """The ShareStateRecord of a record: carried if this side built it, else decoded from its bytes."""
    if isinstance(record, ShareWrite):
        return record.decoded
    return decode(record[0], record[1])
