"""coordinator: the group coordinator, in Kafka 4's shape: a front door (service.GroupCoordinatorService),
a shard per `__consumer_offsets` partition (shard.GroupCoordinatorShard) holding a group manager and an
offset manager, handlers that produce records, and state changed by replaying them. The classic
protocol's steps keep the seeds' names. Deterministic: an injected clock and timer, one writer.

No sockets, no asyncio outside its runtime package. May import: protocol, storage.
"""
from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.core import OFFSETS_TOPIC, RecordWriter
from kcoord.coordinator.events import CoordinatorEvents
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.results import (
    DescribedGroup,
    DescribedMember,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    ListedGroup,
    OffsetCommit,
    OffsetCommitRequestPartition,
    OffsetFetchPartition,
    OffsetFetchResult,
    RequestContext,
    SyncGroupResult,
)
from kcoord.coordinator.service import GroupCoordinatorService
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.coordinator.timers import TimerQueue

__all__ = [
    "OFFSETS_TOPIC", "CoordinatorEvents", "DescribedGroup", "DescribedMember", "GroupConfig",
    "GroupCoordinatorService", "GroupCoordinatorShard", "GroupState", "JoinGroupMember", "JoinGroupResult",
    "LeaveGroupResult", "LeaveMemberResult", "ListedGroup", "OffsetCommit", "OffsetCommitRequestPartition",
    "OffsetFetchPartition", "OffsetFetchResult", "RecordWriter", "RequestContext", "SyncGroupResult", "TimerQueue",
]
