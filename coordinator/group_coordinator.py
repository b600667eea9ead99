"""GroupCoordinator: the classic consumer-group coordinator, composed from one module per concern:

    join.py        JoinGroup         (handle_join_group, do_unknown_join_group, do_join_group, ...)
    sync.py        SyncGroup         (handle_sync_group, do_sync_group)
    membership.py  Heartbeat, LeaveGroup
    rebalance.py   prepare_rebalance, on_complete_join, pending sync, heartbeat expiry, store_group
    offsets.py     OffsetCommit, OffsetFetch, offset retention
    admin.py       DescribeGroups, ListGroups, DeleteGroups, OffsetDelete
    loading.py     load_partition / unload_partition (replay)
"""
from __future__ import annotations

from coordinator.admin import AdminMixin
from coordinator.join import JoinGroupMixin
from coordinator.loading import LoadingMixin
from coordinator.membership import MembershipMixin
from coordinator.offsets import RETENTION_TIMER_KEY
from coordinator.sync import SyncGroupMixin


class GroupCoordinator(JoinGroupMixin, SyncGroupMixin, MembershipMixin, AdminMixin, LoadingMixin):
    """Pure and deterministic: handlers take a callback and return; time comes from the injected
    clock, timers from the injected keyed timer, and every record goes through the one writer."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.schedule_offset_expiration()

    def shutdown(self) -> None:
        """Stop serving: every group is unloaded, so parked JoinGroup/SyncGroup requests are answered
        NOT_COORDINATOR instead of hanging; later requests get COORDINATOR_NOT_AVAILABLE."""
        self.active = False
        self.timer.cancel(RETENTION_TIMER_KEY)
        for partition in sorted({self.partition_for(g) for g in self.groups}):
            self.unload_partition(partition)
