"""The two records a consumer group writes most -- ConsumerGroupTargetAssignmentMemberValue and
ConsumerGroupCurrentMemberAssignmentValue (version 0, flexible) -- encoded straight from an assignment,
and their decoded form as light tuples.

Forming a group of n members writes O(n log n) of them; the generic codec builds a message object per
record and per topic, then walks it. Assignments hold frozensets of partitions (member.Assignment). The bytes here are the codec's, field for field (tests compare
them): int16 version 0; int32 member epoch, int32 previous epoch, int8 state (current assignment only);
each partitions array compact (length + 1), a topic as its 16 id bytes, its int32 partitions compact,
and an empty tagged-field section; an empty tagged-field section to end the value. In a current
assignment, each topic's tagged section holds its partitions' assignment epochs (KIP-1251's tagged
AssignmentEpochs, tag 0: an int32 compact array in the order of the partitions).
"""
from __future__ import annotations

import uuid
from typing import NamedTuple

from kcoord.protocol.primitives import EMPTY_TAGS, fixed_struct, uvarint_bytes

_VERSION_0 = b"\x00\x00"
_EPOCHS = fixed_struct("iib")


class TopicPartitions(NamedTuple):
    """The decoded form of a TopicPartition(s) struct (same field names as the codec's); `partitions` is
    the assignment's frozenset itself (replay makes a frozenset of it: the same object)."""
    topic_id: uuid.UUID
    partitions: frozenset[int]


class TargetAssignmentMemberValue(NamedTuple):
    topic_partitions: list[TopicPartitions]
    # The Assignment these fields hold (what a replay of the bytes builds), carried so that replaying the
    # record installs this very object: the group's target then shares its values with the assignor's
    # result (an incremental assignor compares them by identity). None: not carried.
    assignment: dict | None = None


class TargetAssignmentMetadataValue(NamedTuple):
    """The carried form of a ConsumerGroupTargetAssignmentMetadataValue we write (its bytes are the
    codec's): `token` names the assignor's step that computed the target these records install
    (assignors/uniform_homogeneous.Memory); replaying the record hands it to the group. None: not carried."""
    assignment_epoch: int
    token: object = None


class CurrentMemberAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: list[TopicPartitions]
    partitions_pending_revocation: list[TopicPartitions]
    assigned: dict | None = None  # as TargetAssignmentMemberValue.assignment, for the two fields
    pending: dict | None = None
    epochs: dict | None = None  # the member's assignment_epochs these fields encode (None: not carried)


def topic_partitions(assignment) -> list[TopicPartitions]:
    """By topic id, topics without partitions left out (as records.py writes them)."""
    return [TopicPartitions(t, p if type(p) is frozenset else frozenset(p)) for t, p in sorted(assignment.items()) if p]


def as_replayed(assignment, tps: list[TopicPartitions]) -> dict:
    """The Assignment a replay of `tps` (topic_partitions(assignment)) builds: `assignment` itself when it
    is already that (every topic non-empty, its partitions a frozenset), else a new one."""
    if len(tps) == len(assignment) and all(assignment[t] is p for t, p in tps):
        return assignment
    return {t: p for t, p in tps}


# frozenset of partitions -> its encoding (compact length, int32s ascending): a member's target is written
# once as its target and again as its assignment when it gets there (reconciliation hands back the target's
# own frozenset), and sorting a large one is most of a record's cost. Bounded: cleared when full.
_ENCODED: dict[frozenset, bytes] = {}
_ENCODED_MAX = 4096


def _partitions(partitions: frozenset[int]) -> bytes:
    encoded = _ENCODED.get(partitions)
    if encoded is None:
        n = len(partitions)
        encoded = uvarint_bytes(n + 1) + fixed_struct(f"{n}i").pack(*sorted(partitions))
        if len(_ENCODED) >= _ENCODED_MAX:
            _ENCODED.clear()
        _ENCODED[partitions] = encoded
    return encoded


_ID_BYTES: dict[uuid.UUID, bytes] = {}  # a topic id's 16 bytes (UUID.bytes computes them in Python each time)


def _id_bytes(topic_id: uuid.UUID) -> bytes:
    encoded = _ID_BYTES.get(topic_id)
    if encoded is None:
        if len(_ID_BYTES) >= _ENCODED_MAX:
            _ID_BYTES.clear()
        encoded = _ID_BYTES[topic_id] = topic_id.bytes
    return encoded


def _array(tps: list[TopicPartitions], parts: list, epochs: dict | None = None) -> None:
    parts.append(uvarint_bytes(len(tps) + 1))
    for topic_id, partitions in tps:
        parts += (_id_bytes(topic_id), _partitions(partitions),
                  EMPTY_TAGS if epochs is None else _epoch_tags(partitions, epochs.get(topic_id, {})))


_ONE_TAG = uvarint_bytes(1) + uvarint_bytes(0)  # one tagged field, tag 0 (AssignmentEpochs)


def _epoch_tags(partitions: frozenset[int], epochs: dict[int, int]) -> bytes:
    """The tagged section of a topic: its partitions' assignment epochs, in the partitions' (sorted) order."""
    n = len(partitions)
    payload = uvarint_bytes(n + 1) + fixed_struct(f"{n}i").pack(*(epochs.get(p, 0) for p in sorted(partitions)))
    return _ONE_TAG + uvarint_bytes(len(payload)) + payload


_ONE_TOPIC, _NO_TOPICS = uvarint_bytes(2), uvarint_bytes(1)


def encode_target_one(topic_id: uuid.UUID, partitions: frozenset[int]) -> bytes:
    """encode_target of a target holding partitions of one topic."""
    return b"".join((_VERSION_0, _ONE_TOPIC, _id_bytes(topic_id), _partitions(partitions), EMPTY_TAGS, EMPTY_TAGS))


def encode_target(value: TargetAssignmentMemberValue) -> bytes:
    parts = [_VERSION_0]
    _array(value.topic_partitions, parts)
    parts.append(EMPTY_TAGS)
    return b"".join(parts)


def encode_current_one(member_epoch: int, previous_member_epoch: int, state: int, topic_id: uuid.UUID,
                       partitions: frozenset[int], epochs: dict[int, int]) -> bytes:
    """encode_current of an assignment of one topic's partitions (`epochs`: theirs), none pending revocation."""
    return b"".join((_VERSION_0, _EPOCHS.pack(member_epoch, previous_member_epoch, state), _ONE_TOPIC,
                     _id_bytes(topic_id), _partitions(partitions), _epoch_tags(partitions, epochs), _NO_TOPICS,
                     EMPTY_TAGS))


def encode_current(value: CurrentMemberAssignmentValue) -> bytes:
    parts = [_VERSION_0, _EPOCHS.pack(value.member_epoch, value.previous_member_epoch, value.state)]
    epochs = value.epochs or {}
    _array(value.assigned_partitions, parts, epochs)
    _array(value.partitions_pending_revocation, parts, epochs)
    parts.append(EMPTY_TAGS)
    return b"".join(parts)
