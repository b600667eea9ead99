"""ShareGroupHeartbeat's steps (Kafka 4.2's GroupMetadataManager.shareGroupHeartbeat, shareGroupLeave,
shareGroupFenceMember), pure: from a group as the log has it and a request, the records to write and
the answer. The manager (manager.py) writes the records and answers once they are durable.

    validate        throwIfShareGroupHeartbeatRequestIsInvalid: INVALID_REQUEST for bad fields
    heartbeat       the member (created by its first heartbeat with the client's own id and epoch 0;
                    else UNKNOWN_MEMBER_ID; an epoch it does not hold: FENCED_MEMBER_EPOCH), its
                    subscription (a change, or subscribed topics created / deleted / grown, bumps the group epoch), the
                    target assignment recomputed
                    with the simple share assignor when the group epoch passed the assignment epoch,
                    and the member moved to its target at once (no revocation in a share group)
    fence           a member leaving (epoch -1) or whose session expired: its records' tombstones and
                    a group epoch bump (the others get their new targets on their next heartbeat)
"""
from __future__ import annotations

from typing import NamedTuple

from kcoord.coordinator.consumer.errors import GroupError
from kcoord.coordinator.consumer.topics_image import TopicsImage
from kcoord.coordinator.share import assignor
from kcoord.coordinator.share import records as r
from kcoord.coordinator.share.share_group import ShareGroup, ShareGroupMember
from kcoord.protocol.errors import ErrorCode

E = ErrorCode
LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareHeartbeatResult(NamedTuple):
    """What a ShareGroupHeartbeat answers."""
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: r.Assignment | None = None  # None: not sent this time


def validate(request) -> GroupError | None:
    """throwIfShareGroupHeartbeatRequestIsInvalid (Kafka 4.2: the member id is the client's, never empty)."""
    def invalid(message: str) -> GroupError:
        return GroupError(E.INVALID_REQUEST, message)

    if not request.group_id:
        return invalid("GroupId can't be empty.")
    if request.rack_id == "":
        return invalid("RackId can't be empty.")
    if not request.member_id:
        return invalid("MemberId can't be empty.")
    if request.member_epoch == 0:
        if not request.subscribed_topic_names:
            return invalid("SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return invalid("MemberEpoch is invalid.")
    return None


def not_a_share_group(group_id: str) -> GroupError:
    """getOrMaybeCreatePersistedShareGroup on an id a classic or consumer group holds (no conversion)."""
    return GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")


def member_of(group: ShareGroup | None, group_id: str, member_id: str, epoch: int,
              max_size: int) -> ShareGroupMember:
    """getOrMaybeSubscribeShareGroupMember, with throwIfShareGroupIsFull and the epoch check
    (throwIfShareGroupMemberEpochIsInvalid)."""
    if group is None:
        if epoch != 0:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        return ShareGroupMember(member_id)
    member = group.members.get(member_id)
    if member is None and len(group.members) >= max_size:
        raise GroupError(E.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of "
                                                    f"{max_size} members.")
    if member is None:
        if epoch != 0:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        return ShareGroupMember(member_id)
    if epoch > member.member_epoch:
        raise GroupError(E.FENCED_MEMBER_EPOCH, f"The share group member has a greater member epoch ({epoch}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The member must abandon "
                         "all its partitions and rejoin.")
    if epoch < member.member_epoch and epoch != member.previous_member_epoch:
        raise GroupError(E.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member epoch ({epoch}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The member must abandon "
                         "all its partitions and rejoin.")
    return member


def heartbeat(group: ShareGroup | None, request, client_id: str, client_host: str, topics: TopicsImage,
              max_size: int, heartbeat_interval_ms: int) -> tuple[list, ShareHeartbeatResult]:
    """shareGroupHeartbeat of a joining or current member: (records, answer)."""
    gid, epoch = request.group_id, request.member_epoch
    member = member_of(group, gid, request.member_id, epoch, max_size)
    known = group is not None and member.member_id in group.members
    records: list = []
    rack = member.rack_id if request.rack_id is None else request.rack_id
    names = member.subscribed_topic_names if request.subscribed_topic_names is None else \
        tuple(sorted(set(request.subscribed_topic_names)))
    if not known or (rack, client_id, client_host, names) != (
            member.rack_id, member.client_id, member.client_host, member.subscribed_topic_names):
        records.append(r.member_subscription_record(gid, member.member_id, rack, client_id, client_host, names))
    group_epoch = 0 if group is None else group.group_epoch
    assignment_epoch = 0 if group is None else group.assignment_epoch
    if not known or names != member.subscribed_topic_names or (  # hasMemberSubscriptionChanged
            group is not None and group_epoch == assignment_epoch and metadata_changed(group, topics)):
        group_epoch += 1
        records.append(r.group_epoch_record(gid, group_epoch))
    if group_epoch > assignment_epoch:  # updateTargetAssignment
        subscriptions = {} if group is None else {m.member_id: m.subscribed_topic_names for m in group.members.values()}
        subscriptions[member.member_id] = names
        current = {} if group is None else group.target
        targets = compute_target(subscriptions, current, topics)
        for member_id in sorted(targets):
            if targets[member_id] != current.get(member_id, {}):
                records.append(r.target_member_record(gid, member_id, targets[member_id]))
        records.append(r.target_epoch_record(gid, group_epoch))
        target, assignment_epoch = targets[member.member_id], group_epoch
    else:
        target = group.target.get(member.member_id, {}) if group is not None else {}
    # maybeReconcile: a share member takes its target at once (ShareGroupAssignmentBuilder)
    new_epoch, previous, assigned = member.member_epoch, member.previous_member_epoch, member.assigned
    if not known or member.member_epoch != assignment_epoch or member.assigned != target:
        new_epoch, previous, assigned = assignment_epoch, member.member_epoch, target
        records.append(r.current_assignment_record(gid, member.member_id, new_epoch, previous, assigned))
    send = epoch == 0 or assigned != member.assigned
    return records, ShareHeartbeatResult(E.NONE, None, member.member_id, new_epoch, heartbeat_interval_ms,
                                         dict(assigned) if send else None)


def metadata_changed(group: ShareGroup, topics: TopicsImage) -> bool:
    """The subscribed topics' partitions are not what the target covers: a topic was created, deleted or grew
    (Kafka 4.2 compares a hash of the subscribed topics' metadata, kept with the group epoch; a share
    group's target covers every partition of every subscribed topic, so the target itself tells)."""
    expected: dict = {}
    for name in group.subscribed_topics():
        known = topics.topic(name)
        if known is not None and known[1] > 0:
            expected[known[0]] = known[1]
    covered: dict = {}
    for assignment in group.target.values():
        for topic_id, partitions in assignment.items():
            covered[topic_id] = covered.get(topic_id, frozenset()) | partitions
    return covered.keys() != expected.keys() or any(len(covered[t]) != n for t, n in expected.items())


def compute_target(subscriptions: dict[str, tuple[str, ...]], current: dict[str, r.Assignment],
                   topics: TopicsImage) -> dict[str, r.Assignment]:
    """The simple share assignor over the members' subscriptions by topic name; topics that do not exist
    (yet) subscribe to nothing, as Kafka's subscription metadata leaves them out."""
    counts = {}
    by_member = {}
    for member_id, names in subscriptions.items():
        ids = set()
        for name in names:
            known = topics.topic(name)
            if known is not None and known[1] > 0:
                ids.add(known[0])
                counts[known[0]] = known[1]
        by_member[member_id] = frozenset(ids)
    return assignor.assign(by_member, counts, current)


def fence(group: ShareGroup, member_id: str) -> list:
    """shareGroupFenceMember: the member's tombstones and the group epoch bumped."""
    return r.member_removal(group.group_id, member_id) + [r.group_epoch_record(group.group_id, group.group_epoch + 1)]
