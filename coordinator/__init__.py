"""coordinator: the classic consumer-group GroupCoordinator, after the seeds, with an injected clock.

No sockets, no asyncio outside its small runtime module. May import: protocol, storage.
"""
from coordinator.config import GroupConfig
from coordinator.core import RecordWriter
from coordinator.group_coordinator import GroupCoordinator
from coordinator.group_state import GroupState
from coordinator.results import (
    DescribedGroup,
    DescribedMember,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    ListedGroup,
    OffsetCommitRequestPartition,
    OffsetFetchPartition,
    OffsetFetchResult,
    SyncGroupResult,
)
from coordinator.timers import TimerQueue

__all__ = [
    "DescribedGroup", "DescribedMember", "GroupConfig", "GroupCoordinator", "GroupState", "JoinGroupMember",
    "JoinGroupResult", "LeaveGroupResult", "LeaveMemberResult", "ListedGroup", "OffsetCommitRequestPartition",
    "OffsetFetchPartition", "OffsetFetchResult", "RecordWriter", "SyncGroupResult", "TimerQueue",
]
