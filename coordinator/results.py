"""What the coordinator hands to a handler's callback: the error and the fields of the response."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kcoord.protocol.errors import ErrorCode


@dataclass(slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: list[JoinGroupMember] = field(default_factory=list)


@dataclass(slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(slots=True)
class LeaveGroupResult:
    error: ErrorCode
    members: list[LeaveMemberResult] = field(default_factory=list)


class OffsetCommitRequestPartition(NamedTuple):
    # A tuple: a commit makes one per partition, and the GC stops tracking tuples of plain values.
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(slots=True)
class OffsetFetchPartition:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class OffsetFetchResult:
    """One group's answer. `partitions` is empty when `error` is set at the group level."""
    group_id: str
    error: ErrorCode
    partitions: list[OffsetFetchPartition] = field(default_factory=list)


@dataclass(slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedMember] = field(default_factory=list)
    message: str | None = None  # v6+ ErrorMessage, when the coordinator names why (KIP-1043)


@dataclass(slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # or "consumer" (KIP-848)


class RequestContext(NamedTuple):
    """What the coordinator needs of a request besides its body (Kafka's RequestContext)."""
    client_id: str = ""
    client_host: str = ""
    api_version: int = 0


class OffsetCommit(NamedTuple):
    """An OffsetCommit as the coordinator takes it: the broker has dropped partitions that do not exist
    (UNKNOWN_TOPIC_OR_PARTITION) and applied the version's rules (retention only v2-v4, the instance id v7+)."""
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    offsets: list[OffsetCommitRequestPartition]
    retention_time_ms: int = -1
    api_version: int = 8
