"""KIP-848's `__consumer_offsets` records, in Kafka 4's formats (GroupCoordinatorRecordHelpers).

The key's int16 version is the record type (group-coordinator/src/main/resources/common/message):

    3  ConsumerGroupMetadata               value: the group epoch
    4  ConsumerGroupPartitionMetadata      value: the subscribed topics' ids and partition counts
    5  ConsumerGroupMemberMetadata         value: a member's subscription, client and timeouts
    6  ConsumerGroupTargetAssignmentMetadata  value: the assignment epoch
    7  ConsumerGroupTargetAssignmentMember    value: a member's target partitions
    8  ConsumerGroupCurrentMemberAssignment   value: a member's epochs, state, owned and revoking partitions
    16 ConsumerGroupRegularExpression      key: group + regex; value: the topics it resolved to, when, at
                                           which topics metadata version

Values are version 0, flexible. A delete is a null value (a tombstone). Encoded and decoded with the
generated codecs of their definitions (protocol/extra_definitions.py).
"""
from __future__ import annotations

import functools
import uuid
from typing import NamedTuple

from kcoord.coordinator.consumer import record_values as rv
from kcoord.coordinator.consumer.member import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    carried_assignment_epochs,
)
from kcoord.protocol import messages as m
from kcoord.protocol.errors import DecodeError
from kcoord.protocol.primitives import string16

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
REGULAR_EXPRESSION = 16
RECORD_TYPES = frozenset((3, 4, 5, 6, 7, 8, REGULAR_EXPRESSION))
_NAMES = {GROUP_METADATA: "Metadata", PARTITION_METADATA: "PartitionMetadata", MEMBER_METADATA: "MemberMetadata",
          TARGET_METADATA: "TargetAssignmentMetadata", TARGET_MEMBER: "TargetAssignmentMember",
          CURRENT_ASSIGNMENT: "CurrentMemberAssignment", REGULAR_EXPRESSION: "RegularExpression"}
_MEMBER_KEYED = {MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT}
_NO_HEADERS: tuple = ()

TopicMetadata = tuple[uuid.UUID, int]  # (topic id, partitions)


class ConsumerRecord(NamedTuple):
    type: int
    group_id: str
    member_id: str | None
    value: object | None  # the decoded value message; None for a tombstone
    regex: str | None = None  # the key's regular expression (REGULAR_EXPRESSION records)


class Written(tuple):
    """A record this coordinator writes: (key, value, headers) as the log gets it, and `.decoded`, the
    ConsumerRecord its bytes decode to (the value message it was encoded from). Replaying it -- into a
    batch's scratch group, and into the shard once durable -- then decodes nothing; a load decodes the
    bytes and replays the same thing."""

    decoded: ConsumerRecord


def _written(rtype: int, group_id: str, member_id: str | None, value, headers: tuple = (),
             encoded: bytes | None = None) -> Written:
    if encoded is None and value is not None:
        encoded = _value(rtype, value)
    record = Written((_key(rtype, group_id, member_id), encoded, headers))
    record.decoded = ConsumerRecord(rtype, group_id, member_id if rtype in _MEMBER_KEYED else None, value)
    return record


def decoded(record) -> ConsumerRecord:
    """The ConsumerRecord of a (key, value, ...) record: carried if we wrote it, else decoded."""
    carried = getattr(record, "decoded", None)
    return carried if carried is not None else decode(record[0], record[1])


def record_type(key) -> int | None:
    """The consumer group record type of a raw key, or None for any other record."""
    if len(key) < 2:
        return None
    version = int.from_bytes(key[:2], "big", signed=True)
    return version if version in RECORD_TYPES else None


@functools.lru_cache(maxsize=1 << 16)
def _key(rtype: int, group_id: str, member_id: str | None = None, regex: str | None = None) -> bytes:
    """A key's bytes (cached: a member's keys are written again at every epoch). Keys are not flexible:
    the int16 type, then int16-length strings; each new member's three keys are built so, not through
    the codec's message objects (tests/coordinator/consumer/test_records.py compares the two)."""
    if regex is None:
        key = _TYPE_PREFIX[rtype] + string16(group_id, "group_id", rtype)
        return key if member_id is None else key + string16(member_id, "member_id", rtype)
    return _codec_key(rtype, group_id, member_id, regex)


_TYPE_PREFIX = {t: t.to_bytes(2, "big") for t in RECORD_TYPES}


def _codec_key(rtype: int, group_id: str, member_id: str | None = None, regex: str | None = None) -> bytes:
    name = f"ConsumerGroup{_NAMES[rtype]}Key"
    fields = {"group_id": group_id} if member_id is None else {"group_id": group_id, "member_id": member_id}
    if regex is not None:
        fields["regular_expression"] = regex
    return m.encode_versioned(name, m.message_class(name)(**fields), rtype)


def _value(rtype: int, value) -> bytes:
    return m.encode_versioned(f"ConsumerGroup{_NAMES[rtype]}Value", value, 0)


@functools.cache
def _cls(rtype: int):
    return m.message_class(f"ConsumerGroup{_NAMES[rtype]}Value")


def decode(key, value) -> ConsumerRecord:
    """Decode a consumer group record (DecodeError if it is not one)."""
    rtype = record_type(key)
    if rtype is None:
        raise DecodeError("not a consumer group record", api="ConsumerGroupRecord", offset=0)
    k, _ = m.decode_versioned(f"ConsumerGroup{_NAMES[rtype]}Key", key)
    v = None if value is None else m.decode_versioned(f"ConsumerGroup{_NAMES[rtype]}Value", value)[0]
    if rtype == REGULAR_EXPRESSION:
        return ConsumerRecord(rtype, k.group_id, None, v, k.regular_expression)
    return ConsumerRecord(rtype, k.group_id, k.member_id if rtype in _MEMBER_KEYED else None, v)


# ---------------------------------------------------------------- assignments

def assignment_epochs_of(value) -> dict[uuid.UUID, dict[int, int]]:
    """The assignment epochs a CurrentMemberAssignment value holds (KIP-1251's tagged AssignmentEpochs);
    a topic written without them (before Kafka 4.3) counts from the record's member epoch, never below 0
    (Kafka's Utils.assignmentFromTopicPartitions default)."""
    carried = getattr(value, "epochs", None)
    if carried is not None:
        return carried
    default = max(value.member_epoch, 0)
    out: dict[uuid.UUID, dict[int, int]] = {}
    for tp in [*(value.assigned_partitions or ()), *(value.partitions_pending_revocation or ())]:
        if not tp.partitions:
            continue
        epochs = getattr(tp, "assignment_epochs", None) or ()
        topic = out.setdefault(tp.topic_id, {})
        for i, p in enumerate(tp.partitions):
            topic[p] = epochs[i] if i < len(epochs) else default
    return out


def assignment_of(topic_partitions) -> Assignment:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in topic_partitions or ():
        if tp.partitions:
            known = out.get(tp.topic_id)
            partitions = frozenset(tp.partitions)  # (a frozenset already: itself)
            out[tp.topic_id] = partitions if known is None else known | partitions
    return out


# ---------------------------------------------------------------- the factory

def group_epoch_record(group_id: str, epoch: int, cause: str | None = None, reason: str = "",
                       trigger_member: str = ""):
    """The group epoch; an epoch bump carries why (the kcoord.rebalance.* headers of docs/CONTRACTS.md)."""
    headers = _NO_HEADERS if cause is None else (
        ("kcoord.rebalance.cause", cause.encode()), ("kcoord.rebalance.reason", reason.encode()),
        ("kcoord.rebalance.trigger_member", trigger_member.encode()))
    return _written(GROUP_METADATA, group_id, None, _cls(GROUP_METADATA)(epoch=epoch), headers)


def group_epoch_tombstone(group_id: str):
    return _written(GROUP_METADATA, group_id, None, None)


def subscription_metadata_record(group_id: str, metadata: dict[str, TopicMetadata]):
    cls = _cls(PARTITION_METADATA)
    topics = [cls.TopicMetadata(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
              for name, (tid, n) in sorted(metadata.items())]
    return _written(PARTITION_METADATA, group_id, None, cls(topics=topics))


def subscription_metadata_tombstone(group_id: str):
    return _written(PARTITION_METADATA, group_id, None, None)


def member_subscription_record(group_id: str, member: ConsumerGroupMember):
    cls = _cls(MEMBER_METADATA)
    classic = None if member.classic is None else cls.ClassicMemberMetadata(
        session_timeout_ms=member.classic.session_timeout_ms,
        supported_protocols=[cls.ClassicMemberMetadata.ClassicProtocol(name=n, metadata=bytes(d))
                             for n, d in member.classic.supported_protocols])
    value = cls(
        instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
        client_host=member.client_host, subscribed_topic_names=sorted(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex, rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor_name, classic_member_metadata=classic)
    return _written(MEMBER_METADATA, group_id, member.member_id, value)


def classic_metadata_of(value) -> ClassicMemberMetadata | None:
    """The ClassicMemberMetadata of a decoded ConsumerGroupMemberMetadataValue (None: consumer protocol)."""
    c = value.classic_member_metadata
    if c is None:
        return None
    return ClassicMemberMetadata(c.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols))


def member_subscription_tombstone(group_id: str, member_id: str):
    return _written(MEMBER_METADATA, group_id, member_id, None)


def target_epoch_record(group_id: str, epoch: int, token: object = None):
    """`token`: the assignor's step whose target the records before this one install (record_values)."""
    value = _cls(TARGET_METADATA)(assignment_epoch=epoch)
    if token is None:
        return _written(TARGET_METADATA, group_id, None, value)
    return _written(TARGET_METADATA, group_id, None, rv.TargetAssignmentMetadataValue(epoch, token),
                    encoded=_value(TARGET_METADATA, value))


def target_epoch_tombstone(group_id: str):
    return _written(TARGET_METADATA, group_id, None, None)


def target_member_record(group_id: str, member_id: str, assignment: Assignment):
    if len(assignment) == 1:  # most targets: the partitions of one topic (what the general path gives)
        ((topic_id, partitions),) = assignment.items()
        if partitions and type(partitions) is frozenset:
            value = rv.TargetAssignmentMemberValue([rv.TopicPartitions(topic_id, partitions)], assignment)
            return _written(TARGET_MEMBER, group_id, member_id, value,
                            encoded=rv.encode_target_one(topic_id, partitions))
    tps = rv.topic_partitions(assignment)
    value = rv.TargetAssignmentMemberValue(tps, rv.as_replayed(assignment, tps))
    return _written(TARGET_MEMBER, group_id, member_id, value, encoded=rv.encode_target(value))


def target_member_tombstone(group_id: str, member_id: str):
    return _written(TARGET_MEMBER, group_id, member_id, None)


def current_assignment_record(group_id: str, member: ConsumerGroupMember):
    assigned, pending = member.assigned_partitions, member.partitions_pending_revocation
    if not member.assignment_epochs and (assigned or pending):  # a member made whole, not by replace()
        member = member.replace(assignment_epochs=carried_assignment_epochs({}, assigned, pending,
                                                                            member.member_epoch))
    if not pending and len(assigned) == 1:  # most: partitions of one topic, none being revoked
        ((topic_id, partitions),) = assigned.items()
        if partitions and type(partitions) is frozenset:
            value = rv.CurrentMemberAssignmentValue(member.member_epoch, member.previous_member_epoch,
                                                    member.state, [rv.TopicPartitions(topic_id, partitions)],
                                                    [], assigned, pending, member.assignment_epochs)
            return _written(CURRENT_ASSIGNMENT, group_id, member.member_id, value,
                            encoded=rv.encode_current_one(value.member_epoch, value.previous_member_epoch,
                                                          value.state, topic_id, partitions,
                                                          member.assignment_epochs.get(topic_id, {})))
    assigned_tps, pending_tps = rv.topic_partitions(assigned), rv.topic_partitions(pending)
    value = rv.CurrentMemberAssignmentValue(member.member_epoch, member.previous_member_epoch, member.state,
                                            assigned_tps, pending_tps, rv.as_replayed(assigned, assigned_tps),
                                            rv.as_replayed(pending, pending_tps), member.assignment_epochs)
    return _written(CURRENT_ASSIGNMENT, group_id, member.member_id, value, encoded=rv.encode_current(value))


def current_assignment_tombstone(group_id: str, member_id: str):
    return _written(CURRENT_ASSIGNMENT, group_id, member_id, None)


def regex_record(group_id: str, regex: str, topics, version: int, timestamp_ms: int):
    """What `regex` resolved to (Kafka's newConsumerGroupRegularExpressionRecord: topics sorted)."""
    value = _cls(REGULAR_EXPRESSION)(topics=sorted(topics), version=version, timestamp=timestamp_ms)
    return (_key(REGULAR_EXPRESSION, group_id, regex=regex), _value(REGULAR_EXPRESSION, value), _NO_HEADERS)


def regex_tombstone(group_id: str, regex: str):
    return (_key(REGULAR_EXPRESSION, group_id, regex=regex), None, _NO_HEADERS)


def member_removal(group_id: str, member_id: str) -> list:
    """Kafka's removeMember: the member's current assignment, target and subscription, in that order."""
    return [current_assignment_tombstone(group_id, member_id), target_member_tombstone(group_id, member_id),
            member_subscription_tombstone(group_id, member_id)]


def group_deletion(group_id: str, regexes=()) -> list:
    """A group without members: its target epoch, subscription metadata, resolved regexes and epoch
    (Kafka's ConsumerGroup.createGroupTombstoneRecords)."""
    return [target_epoch_tombstone(group_id), subscription_metadata_tombstone(group_id),
            *(regex_tombstone(group_id, regex) for regex in sorted(regexes)), group_epoch_tombstone(group_id)]
