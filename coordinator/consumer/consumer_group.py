"""ConsumerGroup (Kafka's modern/consumer/ConsumerGroup): what replaying a group's records leaves.

It changes only through `replay` (a durable record, live or on load). Besides the members and the
epochs it keeps two derived tables, as Kafka does: the epoch at which each partition is currently
owned (assigned, or pending revocation) by some member -- a partition is given to its next owner only
when it is free here -- and instance id -> member id for static members.
"""
from __future__ import annotations

import uuid
from typing import NamedTuple

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.errors import PartitionOwnedTwice
from kcoord.coordinator.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    UNRELEASED_PARTITIONS,
    Assignment,
    ConsumerGroupMember,
)

EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"


class ResolvedRegex(NamedTuple):
    """Kafka's ResolvedRegularExpression: the topics a regex matched, at which topics metadata version
    and when (ms)."""
    topics: frozenset[str]
    version: int
    timestamp_ms: int


class ConsumerGroup:
    protocol_type = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}                  # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}        # member id -> target partitions
        self.subscription_metadata: dict[str, r.TopicMetadata] = {}
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}  # (topic id, partition) -> owner's epoch
        self.has_metadata_record = False  # a ConsumerGroupMetadata record exists (the group is persisted)
        # Kafka's subscribedTopicNames: topic -> members subscribing by name; and member id -> its regex.
        # A heartbeat's subscription metadata is then computed without walking every member.
        self.topic_counts: dict[str, int] = {}
        self.regexes: dict[str, str] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}  # regex -> its last recorded resolution
        self.num_classic_members = 0  # members using the classic protocol (online migration)
        self.assignor_counts: dict[str, int] = {}  # server assignor name -> members asking for it
        # Rises whenever topic_counts or regexes change; with the topics image's version it keys the
        # memo of the group's own subscription metadata (Subscriptions.subscription_metadata).
        self.subscriptions_version = 0
        self.metadata_memo: tuple | None = None
        # The assignor's step whose result target_assignment is, as the last target metadata record said;
        # any target member record replayed after it clears it (record_values.TargetAssignmentMetadataValue).
        self.target_token: object = None

    def copy(self) -> ConsumerGroup:
        """An independent copy (members and assignments are immutable values, so shared)."""
        other = ConsumerGroup(self.group_id)
        other.group_epoch, other.assignment_epoch = self.group_epoch, self.assignment_epoch
        other.has_metadata_record = self.has_metadata_record
        other.num_classic_members = self.num_classic_members
        other.subscriptions_version, other.metadata_memo = self.subscriptions_version, self.metadata_memo
        other.target_token = self.target_token
        for name in ("members", "static_members", "target_assignment", "subscription_metadata", "partition_epochs",
                     "topic_counts", "regexes", "resolved_regexes", "assignor_counts"):
            setattr(other, name, dict(getattr(self, name)))
        return other

    # ------------------------------------------------------------ reads

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroup.maybeUpdateGroupState, computed."""
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return RECONCILING
        return STABLE

    def last_regex_refresh_ms(self) -> int:
        """When the regexes were last resolved (Kafka's lastResolvedRegularExpressionRefreshTimeMs); 0: never."""
        return max((x.timestamp_ms for x in self.resolved_regexes.values()), default=0)

    def last_regex_version(self) -> int:
        """The topics image version the oldest recorded resolution was made at (Kafka's
        lastResolvedRegularExpressionVersion); 0: none recorded."""
        return min((x.version for x in self.resolved_regexes.values()), default=0)

    def is_empty(self) -> bool:
        return not self.members

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return None if member_id is None else self.members.get(member_id)

    def target_of(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """A member's target; a static member that replaces another inherits its target."""
        target = self.target_assignment.get(member_id)
        if target is None and instance_id is not None:
            previous = self.static_members.get(instance_id)
            target = self.target_assignment.get(previous) if previous is not None else None
        return target or {}

    def subscribed_topic_names(self, old: ConsumerGroupMember | None = None,
                               new: ConsumerGroupMember | None = None) -> set[str]:
        """Every topic some member subscribes to, with `old` replaced by `new` (either may be None)."""
        topics: set[str] = set()
        for member in self.members.values():
            if old is not None and member.member_id == old.member_id:
                continue
            topics |= member.subscribed_topic_names
        if new is not None:
            topics |= new.subscribed_topic_names
        return topics

    def preferred_server_assignor(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None,
                                  default: str) -> str:
        """The assignor most members ask for (Kafka's computePreferredServerAssignor; ties: by name)."""
        counts = dict(self.assignor_counts)  # kept by replay: O(assignors), not O(members)
        previous = self.members.get(old.member_id) if old is not None else None
        if previous is not None and previous.server_assignor_name:
            counts[previous.server_assignor_name] -= 1
        if new is not None and new.server_assignor_name:
            counts[new.server_assignor_name] = counts.get(new.server_assignor_name, 0) + 1
        names = sorted(name for name, count in counts.items() if count > 0)
        if not names:
            return default
        return max(names, key=counts.__getitem__)

    # ------------------------------------------------------------ online migration (KIP-848)

    def supports_classic_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: type "consumer", and (unless the group is
        empty) one of `protocols` is supported by every classic member."""
        if protocol_type != "consumer":
            return False
        if self.is_empty():
            return bool(protocols)
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.classic is not None:
                for name in {n for n, _ in member.classic.supported_protocols}:
                    counts[name] = counts.get(name, 0) + 1
        return any(counts.get(name, 0) == self.num_classic_members for name in protocols)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        member = self.members.get(member_id)
        return (self.num_classic_members == len(self.members) - 1 and member is not None
                and member.classic is None)

    def waiting_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Kafka's ConsumerGroup.waitingOnUnreleasedPartition: a partition of its target is still owned
        by another member."""
        if member.state != UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_assignment.get(member.member_id, {}).items():
            assigned = member.assigned_partitions.get(topic_id, frozenset())
            if any(p not in assigned and self.current_partition_epoch(topic_id, p) != -1 for p in partitions):
                return True
        return False

    # ------------------------------------------------------------ replay

    def replay(self, record: r.ConsumerRecord) -> None:
        v = record.value
        match record.type:
            case r.GROUP_METADATA:
                if v is not None:
                    self.group_epoch = v.epoch
                    self.has_metadata_record = True
                else:
                    self.has_metadata_record = False
            case r.PARTITION_METADATA:
                self.subscription_metadata = {} if v is None else {
                    t.topic_name: (t.topic_id, t.num_partitions) for t in v.topics}
            case r.MEMBER_METADATA:
                if v is None:
                    self._remove_member(record.member_id)
                else:
                    old = self.members.get(record.member_id) or ConsumerGroupMember(record.member_id)
                    self._update_member(old, old.replace(
                        instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                        client_host=v.client_host, subscribed_topic_names=frozenset(v.subscribed_topic_names),
                        subscribed_topic_regex=v.subscribed_topic_regex, rebalance_timeout_ms=v.rebalance_timeout_ms,
                        server_assignor_name=v.server_assignor, classic=r.classic_metadata_of(v)))
            case r.REGULAR_EXPRESSION:
                self.subscriptions_version += 1  # what a regex subscribes to changed (the metadata memo)
                if v is None:
                    self.resolved_regexes.pop(record.regex, None)
                else:
                    self.resolved_regexes[record.regex] = ResolvedRegex(frozenset(v.topics), v.version, v.timestamp)
            case r.TARGET_METADATA:
                self.assignment_epoch = -1 if v is None else v.assignment_epoch
                self.target_token = getattr(v, "token", None)
            case r.TARGET_MEMBER:
                self.target_token = None
                if v is None:
                    self.target_assignment.pop(record.member_id, None)
                else:
                    carried = getattr(v, "assignment", None)  # (records we wrote carry it: record_values)
                    self.target_assignment[record.member_id] = (
                        carried if carried is not None else r.assignment_of(v.topic_partitions))
            case r.CURRENT_ASSIGNMENT:
                old = self.members.get(record.member_id) or ConsumerGroupMember(record.member_id)
                if v is None:  # the member leaves: it owns nothing any more
                    new = old.replace(member_epoch=LEAVE_GROUP_MEMBER_EPOCH, previous_member_epoch=-1,
                                      assigned_partitions={}, partitions_pending_revocation={})
                else:
                    assigned, pending = getattr(v, "assigned", None), getattr(v, "pending", None)
                    new = old.replace(member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                                      state=v.state,
                                      assigned_partitions=assigned if assigned is not None
                                      else r.assignment_of(v.assigned_partitions),
                                      partitions_pending_revocation=pending if pending is not None
                                      else r.assignment_of(v.partitions_pending_revocation),
                                      assignment_epochs=r.assignment_epochs_of(v))
                if v is not None or record.member_id in self.members:
                    self._update_member(old, new)

    def _count_subscriptions(self, member: ConsumerGroupMember, delta: int) -> None:
        self.subscriptions_version += 1
        if member.classic is not None:
            self.num_classic_members += delta
        if member.server_assignor_name:
            left = self.assignor_counts.get(member.server_assignor_name, 0) + delta
            if left > 0:
                self.assignor_counts[member.server_assignor_name] = left
            else:
                self.assignor_counts.pop(member.server_assignor_name, None)
        for name in member.subscribed_topic_names:
            left = self.topic_counts.get(name, 0) + delta
            if left > 0:
                self.topic_counts[name] = left
            else:
                self.topic_counts.pop(name, None)
        if delta < 0:
            self.regexes.pop(member.member_id, None)
        elif member.subscribed_topic_regex:
            self.regexes[member.member_id] = member.subscribed_topic_regex

    def _update_member(self, old: ConsumerGroupMember, new: ConsumerGroupMember) -> None:
        self._remove_partition_epochs(old)
        if old.member_id not in self.members:
            self._count_subscriptions(new, +1)
        elif not _same_subscription(old, new):  # e.g. a new assignment: the counts stay as they are
            self._count_subscriptions(old, -1)
            self._count_subscriptions(new, +1)
        self.members[new.member_id] = new
        if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
            del self.static_members[old.instance_id]
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        self._add_partition_epochs(new)

    def _remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._count_subscriptions(member, -1)
        self._remove_partition_epochs(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]

    def _remove_partition_epochs(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    self.partition_epochs.pop((topic_id, p), None)

    def _add_partition_epochs(self, member: ConsumerGroupMember) -> None:
        owned = [(topic_id, p) for assignment in (member.assigned_partitions, member.partitions_pending_revocation)
                 for topic_id, partitions in assignment.items() for p in partitions]
        taken = [tp for tp in owned if tp in self.partition_epochs]
        for tp in owned:
            self.partition_epochs[tp] = member.member_epoch
        if taken:  # after the update, so the group stays consistent with its records
            raise PartitionOwnedTwice(f"group {self.group_id}: member {member.member_id} is given {taken}, "
                                      "still owned by another member")


def _same_subscription(a: ConsumerGroupMember, b: ConsumerGroupMember) -> bool:
    """Whether the group's counts (_count_subscriptions) see the same member in `a` and `b`."""
    return (a.subscribed_topic_names == b.subscribed_topic_names and a.subscribed_topic_regex == b.subscribed_topic_regex
            and a.server_assignor_name == b.server_assignor_name and (a.classic is None) == (b.classic is None)
            and a.member_id == b.member_id)
