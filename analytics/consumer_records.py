"""KIP-848 consumer group records (key types 3-8 and 16), decoded one record at a time.

They are rare next to offset commits (a few per epoch bump), so a small cursor reads them. Layouts are
those of Kafka 4's group-coordinator message definitions; every key is non-flexible (int16 type, then
int16-length strings), every value is version 0 and flexible (compact strings/arrays, tagged fields):

    3  ConsumerGroupMetadata            key: group           value: Epoch; tag 0 MetadataHash (4.1+)
    4  ConsumerGroupPartitionMetadata   key: group           value: Topics [TopicId, TopicName,
                                                             NumPartitions, PartitionMetadata (unused)]
    5  ConsumerGroupMemberMetadata      key: group, member   value: InstanceId, RackId, ClientId, ClientHost,
                                        SubscribedTopicNames, SubscribedTopicRegex, RebalanceTimeoutMs,
                                        ServerAssignor; tag 0 ClassicMemberMetadata (SessionTimeoutMs, ...)
    6  ConsumerGroupTargetAssignmentMetadata  key: group     value: AssignmentEpoch
    7  ConsumerGroupTargetAssignmentMember    key: group, member  value: TopicPartitions [TopicId, Partitions]
    8  ConsumerGroupCurrentMemberAssignment   key: group, member  value: MemberEpoch, PreviousMemberEpoch,
                                        State, AssignedPartitions, PartitionsPendingRevocation
    16 ConsumerGroupRegularExpression   key: group, regex    value: Topics, Version, Timestamp

A null value is a tombstone (the member, the group or the resolved regex was deleted).
"""
import struct
import uuid

import pyarrow as pa

from kcoord.analytics.group_metadata import Cursor, Truncated

GROUP_EPOCH, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_EPOCH, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
REGULAR_EXPRESSION = 16
TYPES = (3, 4, 5, 6, 7, 8, 16)
_SECOND_KEY_FIELD = {MEMBER_METADATA: "member_id", TARGET_MEMBER: "member_id", CURRENT_ASSIGNMENT: "member_id",
                     REGULAR_EXPRESSION: "regex"}
_I64 = struct.Struct(">q")

TOPIC_PARTITIONS = pa.list_(pa.struct([("topic_id", pa.string()), ("partition", pa.int32())]))
SCHEMA = pa.schema([
    ("log_partition", pa.int32()), ("log_offset", pa.int64()), ("timestamp", pa.int64()),
    ("group", pa.string()), ("record_type", pa.int16()), ("member_id", pa.string()), ("regex", pa.string()),
    ("tombstone", pa.bool_()),
    ("epoch", pa.int32()),                    # 3: group epoch; 6: assignment epoch; 8: member epoch
    ("previous_member_epoch", pa.int32()), ("state", pa.int8()),
    ("metadata_hash", pa.int64()),            # 3, Kafka 4.1+ (tagged); null when absent
    ("topics", pa.list_(pa.struct([("topic_id", pa.string()), ("topic_name", pa.string()),
                                   ("num_partitions", pa.int32())]))),   # 4
    ("instance_id", pa.string()), ("rack_id", pa.string()), ("client_id", pa.string()),
    ("client_host", pa.string()), ("subscribed_topic_names", pa.list_(pa.string())),
    ("subscribed_topic_regex", pa.string()), ("rebalance_timeout_ms", pa.int32()),
    ("server_assignor", pa.string()),
    ("classic_session_timeout_ms", pa.int32()),   # 5: set only for a classic-protocol member (migration)
    ("partitions", TOPIC_PARTITIONS),             # 7: target; 8: assigned
    ("pending_revocation", TOPIC_PARTITIONS),     # 8
    ("regex_topics", pa.list_(pa.string())), ("regex_version", pa.int64()),   # 16
    ("regex_timestamp", pa.int64()),
    ("headers", pa.map_(pa.string(), pa.string())),
])
FIELDS = SCHEMA.names


def record_type(key) -> int | None:
    """The consumer group record type of a raw key, or None for any other record."""
    if len(key) < 2:
        return None
    t = int.from_bytes(key[:2], "big", signed=True)
    return t if t in TYPES else None


def decode_key(key) -> dict:
    """{record_type, group, member_id | regex} of a type 3-8/16 key (ValueError for another type)."""
    t = record_type(key)
    if t is None:
        raise ValueError("not a consumer group record key")
    c = Cursor(key, 2)
    out = {"record_type": t, "group": c.string(), "member_id": None, "regex": None}
    if t in _SECOND_KEY_FIELD:
        out[_SECOND_KEY_FIELD[t]] = c.string()
    return out


def _uuid(c: Cursor) -> str:
    return str(uuid.UUID(bytes=c.raw(16)))


def _tagged(c: Cursor) -> dict[int, bytes]:
    out = {}
    for _ in range(c.uvarint()):
        tag = c.uvarint()
        out[tag] = c.raw(c.uvarint())
    return out


def _topic_partitions(c: Cursor) -> list[tuple[str, int]]:
    def one():
        tid = _uuid(c)
        parts = c.array(c.int32) or []
        c.tagged_fields()
        return [(tid, p) for p in parts]
    return sorted(tp for tps in c.array(one) or [] for tp in tps)


def _group_epoch(c, out):
    out["epoch"] = c.int32()
    tags = _tagged(c)
    if 0 in tags and len(tags[0]) == 8:
        out["metadata_hash"] = _I64.unpack(tags[0])[0]


def _partition_metadata(c, out):
    def topic():
        tid, name, n = _uuid(c), c.string(), c.int32()

        def rack_entry():
            c.int32()
            c.array(c.string)
            c.tagged_fields()
        c.array(rack_entry)
        c.tagged_fields()
        return (tid, name, n)
    out["topics"] = sorted(c.array(topic) or [], key=lambda t: t[1] or "")
    c.tagged_fields()


def _classic_session_timeout(data: bytes) -> int | None:
    """ClassicMemberMetadata (tag 0 of MemberMetadataValue), a nullable struct: a presence byte (1, or -1
    for null), then its SessionTimeoutMs first."""
    if len(data) < 5 or data[0] != 1:
        return None
    return struct.unpack_from(">i", data, 1)[0]


def _member_metadata(c, out):
    out.update(instance_id=c.string(), rack_id=c.string(), client_id=c.string(), client_host=c.string(),
               subscribed_topic_names=sorted(c.array(c.string) or []), subscribed_topic_regex=c.string(),
               rebalance_timeout_ms=c.int32(), server_assignor=c.string())
    tags = _tagged(c)
    if 0 in tags:
        out["classic_session_timeout_ms"] = _classic_session_timeout(tags[0])


def _target_epoch(c, out):
    out["epoch"] = c.int32()
    c.tagged_fields()


def _target_member(c, out):
    out["partitions"] = _topic_partitions(c)
    c.tagged_fields()


def _current_assignment(c, out):
    out.update(epoch=c.int32(), previous_member_epoch=c.int32())
    state = c.raw(1)
    out["state"] = struct.unpack(">b", state)[0]
    out["partitions"] = _topic_partitions(c)
    out["pending_revocation"] = _topic_partitions(c)
    c.tagged_fields()


def _regular_expression(c, out):
    out.update(regex_topics=sorted(c.array(c.string) or []), regex_version=c.int64(), regex_timestamp=c.int64())
    c.tagged_fields()


_VALUES = {GROUP_EPOCH: _group_epoch, PARTITION_METADATA: _partition_metadata, MEMBER_METADATA: _member_metadata,
           TARGET_EPOCH: _target_epoch, TARGET_MEMBER: _target_member, CURRENT_ASSIGNMENT: _current_assignment,
           REGULAR_EXPRESSION: _regular_expression}


def decode(key, value) -> dict:
    """One record as a dict with every SCHEMA field of the record (log position fields excluded).
    Raises Truncated / UnicodeDecodeError / ValueError on a malformed record."""
    out = dict.fromkeys(FIELDS[3:-1])
    out.update(decode_key(key))
    out["tombstone"] = value is None
    if value is not None:
        c = Cursor(value, 0, flexible=True)
        version = c.int16()
        if version != 0:
            raise ValueError(f"unknown value version {version} of record type {out['record_type']}")
        _VALUES[out["record_type"]](c, out)
    return out


def row(key, value, position: tuple, headers: dict) -> tuple | None:
    """A SCHEMA tuple: position is (log_partition, log_offset, timestamp); None if the record is malformed."""
    try:
        d = decode(key, value)
    except (Truncated, UnicodeDecodeError, ValueError, struct.error):
        return None
    return position + tuple(d[f] for f in FIELDS[3:-1]) + (headers,)


def to_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True))
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, SCHEMA, strict=True)],
                                      schema=SCHEMA)
