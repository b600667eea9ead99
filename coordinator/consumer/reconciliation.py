"""One reconciliation step of a member towards its target assignment (Kafka's
modern/consumer/CurrentAssignmentBuilder.build and computeNextAssignment).

A member gives up partitions before anyone else gets them: while it still reports owning partitions it
must revoke, it stays in its epoch (UNREVOKED_PARTITIONS); a partition of its target that another
member still owns (the group's partition epochs) is held back (UNRELEASED_PARTITIONS) until freed.
Pure: the group's ownership is passed in as a function.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable

from kcoord.coordinator.consumer.errors import FencedMemberEpoch
from kcoord.coordinator.consumer.member import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Assignment,
    ConsumerGroupMember,
)

Owned = list[tuple[uuid.UUID, list[int]]] | None  # what the member reported; None: not sent this time


def owns_revoked_partitions(owned: Owned, revoking: Assignment) -> bool:
    """Whether the member still reports a partition of `revoking`. Not reported: assumed still owned."""
    if owned is None:
        return True
    return any(p in revoking.get(topic_id, ()) for topic_id, partitions in owned for p in partitions)


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              partition_epoch: Callable[[uuid.UUID, int], int], owned: Owned) -> ConsumerGroupMember:
    """The member after one step towards (target_epoch, target)."""
    if member.state == STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if member.state == UNREVOKED_PARTITIONS:
        if owns_revoked_partitions(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if member.state == UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    # UNKNOWN: a state from a newer coordinator; start over from nothing.
    if owned is None or owned:
        raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _next(member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: Assignment,
          partition_epoch: Callable[[uuid.UUID, int], int], owned: Owned) -> ConsumerGroupMember:
    unreleased = False
    assigned: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    to_assign: dict[uuid.UUID, set[int]] = {}
    for topic_id in target.keys() | member.assigned_partitions.keys():
        wanted = target.get(topic_id, frozenset())
        current = member.assigned_partitions.get(topic_id, frozenset())
        kept = current & wanted
        gone = current - kept
        new = set(wanted - kept)
        free = {p for p in new if partition_epoch(topic_id, p) == -1}
        unreleased = unreleased or len(free) != len(new)
        if kept:
            assigned[topic_id] = set(kept)
        if gone:
            revoking[topic_id] = frozenset(gone)
        if free:
            to_assign[topic_id] = free

    def frozen(a: dict) -> Assignment:
        # a topic's partitions as the target's own frozenset when they are all of it (records encode a
        # frozenset once: record_values)
        out = {}
        for t, p in a.items():
            if p:
                wanted = target.get(t)
                same = type(wanted) is frozenset and len(wanted) == len(p) and wanted == p
                out[t] = wanted if same else frozenset(p)
        return out

    if revoking and owns_revoked_partitions(owned, revoking):
        # Revoke first: the member stays in `member_epoch`, waiting for its acknowledgement.
        return member.replace(previous_member_epoch=member.member_epoch, member_epoch=member_epoch,
                              state=UNREVOKED_PARTITIONS, assigned_partitions=frozen(assigned),
                              partitions_pending_revocation=revoking)
    for topic_id, partitions in to_assign.items():
        assigned.setdefault(topic_id, set()).update(partitions)
    # (Kafka's updateMemberEpoch: the current epoch becomes the previous one)
    return member.replace(previous_member_epoch=member.member_epoch, member_epoch=target_epoch,
                          state=UNRELEASED_PARTITIONS if unreleased else STABLE,
                          assigned_partitions=frozen(assigned), partitions_pending_revocation={})
