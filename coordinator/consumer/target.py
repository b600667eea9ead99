"""The group's target assignment for a new group epoch (Kafka's modern/TargetAssignmentBuilder.build).

The assignor sees every member with `updated` in place of its previous self (and without `removed`),
and the subscribed topics that exist (the subscription metadata). Records: one
ConsumerGroupTargetAssignmentMember per member whose target changed, then the
ConsumerGroupTargetAssignmentMetadata with the new epoch.
"""
from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from operator import attrgetter, is_not

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.assignors import AssignmentMemberSpec, MemberSpecs
from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.coordinator.consumer.member import Assignment, ConsumerGroupMember


def build_target_assignment(group: ConsumerGroup, epoch: int, assignor, updated: ConsumerGroupMember | None,
                            metadata: dict[str, r.TopicMetadata],
                            topics_of: Callable[[ConsumerGroupMember], frozenset[str]],
                            removed: str | None = None) -> tuple[dict[str, Assignment], list]:
    """`topics_of(member)`: the topic names a member subscribes to (its names and its regex's resolution)."""
    members = dict(group.members)
    current = group.target_assignment  # (assignors read it, never change it)
    if removed is not None:
        members.pop(removed, None)
    inherited = False
    if updated is not None:
        if removed is not None and removed in current and updated.member_id not in current:
            current = dict(current)
            current[updated.member_id] = current[removed]  # a static member's replacement inherits its target
            inherited = True
        members[updated.member_id] = updated
    ids = {name: tid for name, (tid, _) in metadata.items()}
    specs_by_key: dict = {}

    def spec_of(m: ConsumerGroupMember) -> AssignmentMemberSpec:
        # Members subscribing to the same topics share one spec (most groups: all of them).
        key = _spec_key(m)
        spec = specs_by_key.get(key)
        if spec is None:
            spec = specs_by_key[key] = AssignmentMemberSpec(
                m.instance_id, m.rack_id, frozenset(ids[t] for t in topics_of(m) if t in ids))
        return spec

    names = _common_subscription(group, members, updated, removed)
    joining = updated.member_id if updated is not None and updated.member_id not in current else None
    specs = MemberSpecs(members, spec_of, None if names is None else frozenset(ids[t] for t in names if t in ids),
                        joining, None if inherited else group.target_token)
    topics = {tid: n for tid, n in metadata.values()}
    new = assignor.assign(specs, topics, current) if members else {}
    # Assignments hold no empty partition sets (assignors leave them out, records.assignment_of too). An
    # assignor hands back an unchanged target as the same object, and may say which members it changed
    # (an incremental step: a few); else the identity test (in C) leaves only the members whose target
    # may have changed to compare.
    old = group.target_assignment
    maybe = None if inherited else getattr(new, "changed", None)  # (an inherited target differs from old)
    if maybe is None:
        maybe = compress(new, map(is_not, new.values(), map(old.get, new)))
    changed = sorted(m for m in maybe if new[m] != old.get(m, _NONE))
    records = [r.target_member_record(group.group_id, member_id, new[member_id]) for member_id in changed]
    # The step's token goes with its records when, replayed, they leave the group's target exactly as
    # `new`: the old entries (all members', an incremental step makes sure) and the changed ones.
    token = getattr(new, "token", None)
    if token is not None and (inherited or len(old) + sum(m not in old for m in changed) != len(new)):
        token = None
    records.append(r.target_epoch_record(group.group_id, epoch, token))
    return new, records


def _common_subscription(group: ConsumerGroup, members: dict, updated: ConsumerGroupMember | None,
                         removed: str | None) -> frozenset[str] | None:
    """The topic names every member subscribes to when they all subscribe to the same names and none by
    regex (Kafka's ModernGroup.subscriptionType: HOMOGENEOUS), else None. From the group's per-topic
    subscriber counts, adjusted for the member being replaced: O(topics), not O(members)."""
    gone = [group.members[m] for m in {removed, updated and updated.member_id} if m in group.members]
    if updated is not None and updated.subscribed_topic_regex:
        return None
    regexes = set(group.regexes) - {m.member_id for m in gone}
    if regexes:
        return None
    counts = dict(group.topic_counts)
    for m in gone:
        for name in m.subscribed_topic_names:
            counts[name] -= 1
    for name in updated.subscribed_topic_names if updated is not None else ():
        counts[name] = counts.get(name, 0) + 1
    n = len(members)
    if any(c not in (0, n) for c in counts.values()):
        return None
    return frozenset(name for name, c in counts.items() if c)


_NONE: Assignment = {}
_spec_key = attrgetter("subscribed_topic_names", "subscribed_topic_regex", "instance_id", "rack_id")
