"""How consumer groups answer the admin APIs (Kafka's ConsumerGroup.asDescribedGroup,
asListedGroup, validateDeleteGroup, createGroupTombstoneRecords, isSubscribedToTopic)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.assignors import DEFAULT_ASSIGNOR
from kcoord.coordinator.consumer.consumer_group import EMPTY, ConsumerGroup
from kcoord.coordinator.consumer.member import Assignment
from kcoord.coordinator.consumer.topics_image import TopicsImage
from kcoord.coordinator.results import DescribedGroup
from kcoord.protocol.errors import ErrorCode

TopicPartitions = list[tuple[uuid.UUID, str, list[int]]]  # (topic id, name, partitions)


@dataclass(slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: TopicPartitions
    target_assignment: TopicPartitions
    classic: bool = False  # joined with the classic protocol (online migration)


@dataclass(slots=True)
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[DescribedConsumerMember] = field(default_factory=list)
    message: str | None = None


def _named(assignment: Assignment, topics: TopicsImage) -> TopicPartitions:
    """Topics the image no longer has are left out, as Kafka does."""
    out = []
    for topic_id, partitions in sorted(assignment.items()):
        name = topics.topic_name(topic_id)
        if name is not None and partitions:
            out.append((topic_id, name, sorted(partitions)))
    return out


def describe(group: ConsumerGroup, topics: TopicsImage, default_assignor: str = DEFAULT_ASSIGNOR) -> DescribedConsumerGroup:
    members = [DescribedConsumerMember(
        m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
        sorted(m.subscribed_topic_names), m.subscribed_topic_regex, _named(m.assigned_partitions, topics),
        _named(group.target_assignment.get(m.member_id, {}), topics), m.classic is not None)
        for m in group.members.values()]
    return DescribedConsumerGroup(group.group_id, ErrorCode.NONE, group.state, group.group_epoch,
                                  group.assignment_epoch, group.preferred_server_assignor(None, None, default_assignor),
                                  members)


def not_a_classic_group(group_id: str, request_version: int) -> DescribedGroup:
    """DescribeGroups on a consumer group (GroupMetadataManager.describeGroups: classicGroup throws
    GroupIdNotFoundException): "Dead"; from v6 (KIP-1043) GROUP_ID_NOT_FOUND, "Group X is not a classic group."."""
    if request_version < 6:
        return DescribedGroup(group_id, ErrorCode.NONE, "Dead", "", "")
    return DescribedGroup(group_id, ErrorCode.GROUP_ID_NOT_FOUND, "Dead", "", "",
                          message=f"Group {group_id} is not a classic group.")


def validate_delete_group(group: ConsumerGroup) -> ErrorCode:
    return ErrorCode.NONE if group.state == EMPTY else ErrorCode.NON_EMPTY_GROUP


def tombstones(group: ConsumerGroup) -> list:
    """Everything of an (empty) group the log holds: its members' records, then the group's."""
    out = []
    for member_id in group.members:
        out += r.member_removal(group.group_id, member_id)
    for member_id in group.target_assignment:
        if member_id not in group.members:
            out.append(r.target_member_tombstone(group.group_id, member_id))
    return out + r.group_deletion(group.group_id, group.resolved_regexes)


def subscribed_topics(group: ConsumerGroup) -> set[str]:
    return group.subscribed_topic_names()


def expired_offsets(group: ConsumerGroup, offsets: dict, pending: dict, subscribed: set[str], now_ms: int,
                    retention_ms: int) -> list[tuple[str, int]]:
    """KIP-211 for consumer groups (OffsetMetadataManager.cleanupExpiredOffsets with
    ConsumerGroup.offsetExpirationCondition): offsets of topics no member subscribes to expire
    `retention_ms` after their commit (or at their expire timestamp); commits in flight never."""
    out = []
    for tp, v in offsets.items():
        if tp[0] in subscribed or tp in pending:
            continue
        if (now_ms >= v.expire_timestamp) if v.expire_timestamp >= 0 else (now_ms - v.commit_timestamp >= retention_ms):
            out.append(tp)
    return out
