"""Who may commit and fetch a consumer group's offsets (Kafka's ConsumerGroup.validateOffsetCommit,
validateOffsetFetch): a member of the group in its current epoch (STALE_MEMBER_EPOCH otherwise), using
OffsetCommit v9+; or anyone (admin tools, manual assignment) with epoch -1 while the group is empty. A
classic member (online migration) commits with any version, its generation being its member epoch
(ILLEGAL_GENERATION otherwise: validateMemberEpoch). A transactional producer's TxnOffsetCommit carries its
consumer's group metadata (member id, and the member epoch as the generation) and is checked the same way,
whatever its version.

KIP-1251 (Kafka 4.3, ConsumerGroup.validateOffsetCommit / createAssignmentEpochValidator): a consumer-protocol
member's commit from an older epoch than its current one is not refused whole -- it races the heartbeat
that bumped the epoch. Each partition is checked instead: accepted if the member owns it (or is revoking
it) since an epoch no newer than the commit's (assignmentEpoch <= clientEpoch <= memberEpoch), else
STALE_MEMBER_EPOCH for that partition alone. A newer epoch than the member's is refused whole; a classic
member still needs its exact epoch."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.coordinator.consumer.member import ConsumerGroupMember
from kcoord.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class AssignmentEpochCheck:
    """The per-partition check of a commit from an older member epoch (KIP-1251)."""
    member: ConsumerGroupMember
    received_epoch: int

    def allows(self, topic_id: uuid.UUID | None, partition: int) -> bool:
        """The member held the partition since an epoch no newer than the commit's (an unknown topic: no)."""
        if topic_id is None:
            return False
        epoch = self.member.assignment_epoch(topic_id, partition)
        return epoch is not None and epoch <= self.received_epoch


Validation = tuple[ErrorCode, AssignmentEpochCheck | None]  # (refused whole?, the per-partition check if any)


def validate_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int,
                           transactional: bool = False) -> Validation:
    if member_epoch < 0 and group.is_empty():
        return ErrorCode.NONE, None
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID, None
    if not transactional and member.classic is None and api_version < 9:
        return ErrorCode.UNSUPPORTED_VERSION, None
    if member.classic is None and 0 <= member_epoch < member.member_epoch:
        return ErrorCode.NONE, AssignmentEpochCheck(member, member_epoch)
    return _validate_member_epoch(member, member_epoch), None


def validate_transactional_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int) -> Validation:
    """OffsetMetadataManager.validateTransactionalOffsetCommit for a consumer group: validateOffsetCommit with
    isTransactional, and STALE_MEMBER_EPOCH -- not an error TxnOffsetCommit knows -- answered as
    ILLEGAL_GENERATION, which transactional producers treat as fatal for the transaction (abort); the same
    for a partition the per-partition check refuses (`stale_error`)."""
    error, check = validate_offset_commit(group, member_id, member_epoch, 0, transactional=True)
    return stale_error(error, transactional=True), check


def stale_error(error: ErrorCode, transactional: bool) -> ErrorCode:
    """What a refused partition (or commit) answers: STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION in a
    TxnOffsetCommit."""
    return ErrorCode.ILLEGAL_GENERATION if transactional and error == ErrorCode.STALE_MEMBER_EPOCH else error


def _validate_member_epoch(member, member_epoch: int) -> ErrorCode:
    if member_epoch == member.member_epoch:
        return ErrorCode.NONE
    return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
    if member_id is None and member_epoch < 0:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return _validate_member_epoch(member, member_epoch)
