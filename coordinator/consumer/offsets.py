"""Who may commit and fetch a consumer group's offsets (Kafka's ConsumerGroup.validateOffsetCommit,
validateOffsetFetch): a member of the group in its current epoch (STALE_MEMBER_EPOCH otherwise), using
OffsetCommit v9+; or anyone (admin tools, manual assignment) with epoch -1 while the group is empty. A
classic member (online migration) commits with any version, its generation being its member epoch
(ILLEGAL_GENERATION otherwise: validateMemberEpoch). A transactional producer's TxnOffsetCommit carries its
consumer's group metadata (member id, and the member epoch as the generation) and is checked the same way,
whatever its version."""
from __future__ import annotations

from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.protocol.errors import ErrorCode


def validate_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int,
                           transactional: bool = False) -> ErrorCode:
    if member_epoch < 0 and group.is_empty():
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not transactional and member.classic is None and api_version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    return _validate_member_epoch(member, member_epoch)


def validate_transactional_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int) -> ErrorCode:
    """OffsetMetadataManager.validateTransactionalOffsetCommit for a consumer group: validateOffsetCommit with
    isTransactional, and STALE_MEMBER_EPOCH -- not an error TxnOffsetCommit knows -- answered as
    ILLEGAL_GENERATION, which transactional producers treat as fatal for the transaction (abort)."""
    error = validate_offset_commit(group, member_id, member_epoch, 0, transactional=True)
    return ErrorCode.ILLEGAL_GENERATION if error == ErrorCode.STALE_MEMBER_EPOCH else error


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
