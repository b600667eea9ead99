"""The parked JoinGroup and SyncGroup requests of a shard's classic groups: who is waiting, and the
continuation that answers them.

Kafka keeps a member's awaiting-join/sync future inside the member object; here the group manager
owns one table, keyed by (group id, member id), so a member object holds only the fact that it
waits (the group's counts need it) and every answer to a parked request goes through one place.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.member_metadata import MemberMetadata
from kcoord.coordinator.results import JoinGroupResult, SyncGroupResult

JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


class ParkedRequests:
    __slots__ = ("_joins", "_syncs")

    def __init__(self) -> None:
        self._joins: dict[tuple[str, str], JoinCallback] = {}
        self._syncs: dict[tuple[str, str], SyncCallback] = {}

    # ------------------------------------------------------------ JoinGroup
    def park_join(self, group: GroupMetadata, member: MemberMetadata, callback: JoinCallback | None) -> None:
        """`member` now waits for the join phase to complete (None: it no longer waits, unanswered)."""
        key = (group.group_id, member.member_id)
        if callback is None:
            if self._joins.pop(key, None) is not None:
                member.awaiting_join = False
                group.num_members_awaiting_join -= 1
            return
        if key not in self._joins:
            member.awaiting_join = True
            group.num_members_awaiting_join += 1
        self._joins[key] = callback

    def complete_join(self, group: GroupMetadata, member: MemberMetadata, result: JoinGroupResult) -> bool:
        """Answer `member`'s parked JoinGroup with `result`; False if it had none."""
        callback = self._joins.pop((group.group_id, member.member_id), None)
        if callback is None:
            return False
        member.awaiting_join = False
        group.num_members_awaiting_join -= 1
        callback(result)
        return True

    # ------------------------------------------------------------ SyncGroup
    def park_sync(self, group: GroupMetadata, member: MemberMetadata, callback: SyncCallback) -> None:
        self._syncs[(group.group_id, member.member_id)] = callback
        member.awaiting_sync = True

    def complete_sync(self, group: GroupMetadata, member: MemberMetadata, result: SyncGroupResult) -> bool:
        callback = self._syncs.pop((group.group_id, member.member_id), None)
        if callback is None:
            return False
        member.awaiting_sync = False
        callback(result)
        return True

    # ------------------------------------------------------------ whole groups
    def members_waiting(self, group_id: str) -> Iterator[str]:
        """Member ids of `group_id` with a parked request (for tests and unloading)."""
        seen = {m for g, m in self._joins if g == group_id} | {m for g, m in self._syncs if g == group_id}
        return iter(sorted(seen))

    def __len__(self) -> int:
        return len(self._joins) + len(self._syncs)
