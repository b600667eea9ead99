"""ConsumerGroupMember (Kafka's modern/consumer/ConsumerGroupMember) and its MemberState.

A member is an immutable value: a heartbeat computes the updated member, writes its records, and the
replay of those records installs it. Assignments map topic id -> frozenset of partitions.
"""
from __future__ import annotations

import dataclasses
import operator
import uuid
from dataclasses import dataclass, field

Assignment = dict[uuid.UUID, frozenset[int]]

# MemberState (Kafka's modern/MemberState): the byte written in CurrentMemberAssignment records.
STABLE = 0
UNREVOKED_PARTITIONS = 1
UNRELEASED_PARTITIONS = 2
UNKNOWN = 127
STATE_NAMES = {STABLE: "stable", UNREVOKED_PARTITIONS: "unrevoked_partitions",
               UNRELEASED_PARTITIONS: "unreleased_partitions", UNKNOWN: "unknown"}

# Special member epochs of the ConsumerGroupHeartbeat request.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member that joined with the classic protocol (JoinGroup) lives in a consumer group with this
    (Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata): its session timeout and the
    (name, metadata) of every protocol its JoinGroup offered, in its order."""
    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor_name: str | None = None
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None  # set for a member using the classic protocol

    @property
    def use_classic_protocol(self) -> bool:
        return self.classic is not None

    def replace(self, **changes) -> ConsumerGroupMember:
        """dataclasses.replace, without its per-field checks (members are replaced on every change)."""
        values = _all_fields(self)
        if not changes.keys() <= _FIELD_INDEX.keys():
            raise TypeError(f"unknown fields {sorted(changes.keys() - _FIELD_INDEX.keys())}")
        values = list(values)
        for name, value in changes.items():
            values[_FIELD_INDEX[name]] = value
        return ConsumerGroupMember(*values)

    def with_epoch(self, epoch: int) -> ConsumerGroupMember:
        """Kafka's Builder.updateMemberEpoch: the current epoch becomes the previous one."""
        return self.replace(previous_member_epoch=self.member_epoch, member_epoch=epoch)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        return self.state == STABLE and self.member_epoch == target_assignment_epoch

    def subscription(self) -> tuple:
        """What the target assignment depends on (a change bumps the group epoch)."""
        return self.subscribed_topic_names, self.subscribed_topic_regex


_FIELD_INDEX = {f.name: i for i, f in enumerate(dataclasses.fields(ConsumerGroupMember))}
_all_fields = operator.attrgetter(*_FIELD_INDEX)


def partitions_count(assignment: Assignment) -> int:
    return sum(len(p) for p in assignment.values())


def is_subset(owned: list[tuple[uuid.UUID, list[int]]] | None, assignment: Assignment) -> bool:
    """Every partition the member says it owns is in `assignment` (Kafka's isSubset)."""
    if owned is None:
        return False
    return all(p in assignment.get(topic_id, ()) for topic_id, partitions in owned for p in partitions)


def owned_to_assignment(owned) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in owned or ():
        out.setdefault(topic_id, set()).update(partitions)
    return {t: frozenset(p) for t, p in out.items() if p}
