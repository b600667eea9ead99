"""ShareGroup and ShareGroupMember (Kafka's modern/share/ShareGroup, ShareGroupMember): everything of a share
group is in the log, so a ShareGroup changes only by `replay` of its records (records.py).

States (ShareGroup.ShareGroupState): Empty (no members) and Stable (members); Dead once deleted. A share
group has no reconciliation: a member takes its target assignment in the heartbeat that sees it, so
there is no Assigning / Reconciling as in a consumer group.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from kcoord.coordinator.share import records as r

EMPTY, STABLE = "Empty", "Stable"


@dataclass
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: r.Assignment = field(default_factory=dict)
    subscribed: bool = False  # its ShareGroupMemberMetadata record was replayed (else a partial load)


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target: dict[str, r.Assignment] = field(default_factory=dict)  # member id -> its target assignment

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def is_empty(self) -> bool:
        return not self.members

    def copy(self) -> ShareGroup:
        return copy.deepcopy(self)

    def subscribed_topics(self) -> set[str]:
        return {t for member in self.members.values() for t in member.subscribed_topic_names}

    def replay(self, record: r.ShareRecord) -> None:
        """GroupCoordinatorShard.replay of one record of this group (GroupMetadataManager.replay(ShareGroup*))."""
        value = record.value
        if record.type == r.GROUP_METADATA:
            if value is not None:
                self.group_epoch = value.epoch
            return
        if record.type == r.TARGET_METADATA:
            if value is not None:
                self.assignment_epoch = value.assignment_epoch
            return
        member_id = record.member_id or ""
        if record.type == r.TARGET_MEMBER:
            if value is None:
                self.target.pop(member_id, None)
            else:
                self.target[member_id] = r.assignment_of(value.topic_partitions)
            return
        if value is None:
            if record.type == r.MEMBER_METADATA:
                self.members.pop(member_id, None)
            elif member_id in self.members:  # the current assignment's tombstone
                member = self.members[member_id]
                member.member_epoch, member.previous_member_epoch, member.assigned = 0, 0, {}
            return
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = ShareGroupMember(member_id)
        if record.type == r.MEMBER_METADATA:
            member.rack_id, member.client_id, member.client_host = value.rack_id, value.client_id, value.client_host
            member.subscribed_topic_names = tuple(sorted(value.subscribed_topic_names))
            member.subscribed = True
        else:  # CURRENT_ASSIGNMENT
            member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
            member.assigned = r.assignment_of(value.assigned_partitions)
