"""KIP-932's share group records of `__consumer_offsets`, in Kafka 4.2's formats
(GroupCoordinatorRecordHelpers.newShareGroup*Record; group-coordinator/src/main/resources/common/message).

The key's int16 version is the record type:

    10 ShareGroupMemberMetadata          value: a member's rack, client and subscribed topic names
    11 ShareGroupMetadata                value: the group epoch
    12 ShareGroupTargetAssignmentMetadata value: the assignment epoch
    13 ShareGroupTargetAssignmentMember  value: a member's target partitions
    14 ShareGroupCurrentMemberAssignment value: a member's epochs, state and assigned partitions

(9, ShareGroupPartitionMetadata, is gone since Kafka 4.1; 15, ShareGroupStatePartitionMetadata, records
which share partitions the share coordinator has initialized: written once that side exists.) Values are
version 0, flexible; a delete is a null value. Encoded and decoded with the generated codecs of their
definitions (protocol/extra_definitions.py). What we write carries `.decoded`, so replaying it decodes
nothing; a load decodes the bytes to the same ShareRecord.
"""
from __future__ import annotations

import functools
import uuid
from typing import NamedTuple

from kcoord.protocol import messages as m
from kcoord.protocol.errors import DecodeError

MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 10, 11, 12, 13, 14
RECORD_TYPES = frozenset((MEMBER_METADATA, GROUP_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT))
_NAMES = {MEMBER_METADATA: "MemberMetadata", GROUP_METADATA: "Metadata", TARGET_METADATA: "TargetAssignmentMetadata",
          TARGET_MEMBER: "TargetAssignmentMember", CURRENT_ASSIGNMENT: "CurrentMemberAssignment"}
_MEMBER_KEYED = frozenset((MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT))
STABLE = 0  # a share member's only state (MemberState.STABLE): it takes its target at once

Assignment = dict[uuid.UUID, frozenset[int]]


class ShareRecord(NamedTuple):
    type: int
    group_id: str
    member_id: str | None
    value: object | None  # the decoded value message; None for a tombstone


class Written(tuple):
    """(key, value, headers) as the log gets it, and `.decoded`: the ShareRecord its bytes decode to."""

    decoded: ShareRecord


def record_type(key) -> int | None:
    """The share group record type of a raw key, or None for any other record."""
    if len(key) < 2:
        return None
    version = int.from_bytes(key[:2], "big", signed=True)
    return version if version in RECORD_TYPES else None


@functools.cache
def _cls(rtype: int, part: str = "Value"):
    return m.message_class(f"ShareGroup{_NAMES[rtype]}{part}")


def _written(rtype: int, group_id: str, member_id: str | None, value) -> Written:
    name = f"ShareGroup{_NAMES[rtype]}"
    fields = {"group_id": group_id} if rtype not in _MEMBER_KEYED else {"group_id": group_id, "member_id": member_id}
    key = m.encode_versioned(name + "Key", _cls(rtype, "Key")(**fields), rtype)
    encoded = None if value is None else m.encode_versioned(name + "Value", value, 0)
    record = Written((key, encoded, ()))
    record.decoded = ShareRecord(rtype, group_id, member_id if rtype in _MEMBER_KEYED else None, value)
    return record


def decode(key, value) -> ShareRecord:
    """Decode a share group record (DecodeError if it is not one)."""
    rtype = record_type(key)
    if rtype is None:
        raise DecodeError("not a share group record", api="ShareGroupRecord", offset=0)
    name = f"ShareGroup{_NAMES[rtype]}"
    k, _ = m.decode_versioned(name + "Key", key)
    v = None if value is None else m.decode_versioned(name + "Value", value)[0]
    return ShareRecord(rtype, k.group_id, k.member_id if rtype in _MEMBER_KEYED else None, v)


def decoded(record) -> ShareRecord:
    carried = getattr(record, "decoded", None)
    return carried if isinstance(carried, ShareRecord) else decode(record[0], record[1])


def assignment_of(topic_partitions) -> Assignment:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in topic_partitions or ():
        if tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


# ---------------------------------------------------------------- the factory

def group_epoch_record(group_id: str, epoch: int) -> Written:
    return _written(GROUP_METADATA, group_id, None, _cls(GROUP_METADATA)(epoch=epoch))


def member_subscription_record(group_id: str, member_id: str, rack_id: str | None, client_id: str,
                               client_host: str, topics) -> Written:
    value = _cls(MEMBER_METADATA)(rack_id=rack_id, client_id=client_id, client_host=client_host,
                                  subscribed_topic_names=sorted(topics))
    return _written(MEMBER_METADATA, group_id, member_id, value)


def target_epoch_record(group_id: str, epoch: int) -> Written:
    return _written(TARGET_METADATA, group_id, None, _cls(TARGET_METADATA)(assignment_epoch=epoch))


def target_member_record(group_id: str, member_id: str, assignment: Assignment) -> Written:
    cls = _cls(TARGET_MEMBER)
    value = cls(topic_partitions=[cls.TopicPartition(topic_id=t, partitions=sorted(p))
                                  for t, p in sorted(assignment.items()) if p])
    return _written(TARGET_MEMBER, group_id, member_id, value)


def current_assignment_record(group_id: str, member_id: str, epoch: int, previous_epoch: int,
                              assignment: Assignment) -> Written:
    cls = _cls(CURRENT_ASSIGNMENT)
    value = cls(member_epoch=epoch, previous_member_epoch=previous_epoch, state=STABLE,
                assigned_partitions=[cls.TopicPartitions(topic_id=t, partitions=sorted(p))
                                     for t, p in sorted(assignment.items()) if p])
    return _written(CURRENT_ASSIGNMENT, group_id, member_id, value)


def member_removal(group_id: str, member_id: str) -> list[Written]:
    """Kafka's shareGroupFenceMember: the member's current assignment, target and subscription tombstones."""
    return [_written(CURRENT_ASSIGNMENT, group_id, member_id, None), _written(TARGET_MEMBER, group_id, member_id, None),
            _written(MEMBER_METADATA, group_id, member_id, None)]


def group_deletion(group_id: str) -> list[Written]:
    """An empty group's tombstones (ShareGroup.createGroupTombstoneRecords): target epoch, then the epoch."""
    return [_written(TARGET_METADATA, group_id, None, None), _written(GROUP_METADATA, group_id, None, None)]
