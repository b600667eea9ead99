"""ConsumerGroupMember (Kafka's modern/consumer/ConsumerGroupMember) and its MemberState.

A member is an immutable value: a heartbeat computes the updated member, writes its records, and the
replay of those records installs it. Assignments map topic id -> frozenset of partitions.

Assignment epochs (KIP-1251, Kafka 4.3's ConsumerGroupMember.assignedPartitionsWithEpochs): each partition
the member owns or is revoking keeps the member epoch at which it was assigned to it. `replace` keeps them:
a partition that stays keeps its epoch, one newly assigned takes the member's (new) epoch, one gone is
forgotten. They let a commit from an older member epoch through for partitions the member held since
(kcoord.coordinator.consumer.offsets).
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
    # topic id -> partition -> its assignment epoch, for every partition assigned or pending revocation
    assignment_epochs: dict[uuid.UUID, dict[int, int]] = field(default_factory=dict, compare=False)

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
        if "assignment_epochs" not in changes and ("assigned_partitions" in changes
                                                   or "partitions_pending_revocation" in changes):
            before = self.assignment_epochs
            if not before and (self.assigned_partitions or self.partitions_pending_revocation):  # made without
                before = carried_assignment_epochs({}, self.assigned_partitions, self.partitions_pending_revocation,
                                                   self.member_epoch)
            values[_EPOCHS] = carried_assignment_epochs(before, values[_ASSIGNED], values[_PENDING],
                                                        values[_MEMBER_EPOCH])
        return ConsumerGroupMember(*values)

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch at which the partition was assigned to the member; None if it neither owns it nor
        is revoking it. A partition of a member made without epochs counts from the member's epoch."""
        if partition not in self.assigned_partitions.get(topic_id, ()) and \
                partition not in self.partitions_pending_revocation.get(topic_id, ()):
            return None
        return self.assignment_epochs.get(topic_id, {}).get(partition, max(self.member_epoch, 0))

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
_EPOCHS, _ASSIGNED, _PENDING, _MEMBER_EPOCH = (_FIELD_INDEX[n] for n in (
    "assignment_epochs", "assigned_partitions", "partitions_pending_revocation", "member_epoch"))


def carried_assignment_epochs(previous: dict[uuid.UUID, dict[int, int]], assigned: Assignment,
                              pending: Assignment, member_epoch: int) -> dict[uuid.UUID, dict[int, int]]:
    """The epochs of `assigned` and `pending`: a partition's previous epoch if it had one, else
    `member_epoch` (never below 0: a static member leaving writes -2; Kafka's Utils default)."""
    default = max(member_epoch, 0)
    out: dict[uuid.UUID, dict[int, int]] = {}
    for assignment in (assigned, pending):
        for topic_id, partitions in assignment.items():
            if not partitions:
                continue
            before = previous.get(topic_id, {})
            epochs = out.setdefault(topic_id, {})
            for p in partitions:
                epochs[p] = before.get(p, default)
    return out


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
