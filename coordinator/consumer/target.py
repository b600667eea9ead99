"""The group's target assignment for a new group epoch (Kafka's modern/TargetAssignmentBuilder.build).

The assignor sees every member with `updated` in place of its previous self (and without `removed`),
and the subscribed topics that exist (the subscription metadata). Records: one
ConsumerGroupTargetAssignmentMember per member whose target changed, then the
ConsumerGroupTargetAssignmentMetadata with the new epoch.
"""
from __future__ import annotations

from collections.abc import Callable

from coordinator.consumer import records as r
from coordinator.consumer.assignors import AssignmentMemberSpec
from coordinator.consumer.consumer_group import ConsumerGroup
from coordinator.consumer.member import Assignment, ConsumerGroupMember


def build_target_assignment(group: ConsumerGroup, epoch: int, assignor, updated: ConsumerGroupMember | None,
                            metadata: dict[str, r.TopicMetadata],
                            topics_of: Callable[[ConsumerGroupMember], frozenset[str]],
                            removed: str | None = None) -> tuple[dict[str, Assignment], list]:
    """`topics_of(member)`: the topic names a member subscribes to (its names and its regex's matches)."""
    members = dict(group.members)
    current = dict(group.target_assignment)
    if removed is not None:
        members.pop(removed, None)
    if updated is not None:
        if removed is not None and removed in current and updated.member_id not in current:
            current[updated.member_id] = current[removed]  # a static member's replacement inherits its target
        members[updated.member_id] = updated
    ids = {name: tid for name, (tid, _) in metadata.items()}
    # Members subscribing to the same topics share one spec (most groups: all of them).
    cache: dict = {}
    specs = {}
    for m in members.values():
        key = (m.subscribed_topic_names, m.subscribed_topic_regex, m.instance_id, m.rack_id)
        spec = cache.get(key)
        if spec is None:
            spec = cache[key] = AssignmentMemberSpec(m.instance_id, m.rack_id,
                                                     frozenset(ids[t] for t in topics_of(m) if t in ids))
        specs[m.member_id] = spec
    topics = {tid: n for tid, n in metadata.values()}
    new = assignor.assign(specs, topics, current) if specs else {}
    # Assignments hold no empty partition sets (assignors leave them out, records.assignment_of too).
    records = [r.target_member_record(group.group_id, member_id, assignment)
               for member_id, assignment in sorted(new.items())
               if group.target_assignment.get(member_id, _NONE) != assignment]
    records.append(r.target_epoch_record(group.group_id, epoch))
    return new, records


_NONE: Assignment = {}
