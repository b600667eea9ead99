"""The coordinator's event sink: what it tells the outside world (metrics) besides its log.

Handlers call the sink explicitly; nothing parses log records. The runtime passes one that updates
the broker's metrics; the default does nothing.
"""
from __future__ import annotations


class CoordinatorEvents:
    """Events with no listener: subclass and override what you need."""

    def rebalance(self, group_id: str, cause: str) -> None:
        """A rebalance of `group_id` began, for `cause` (one of kcoord.coordinator.records.REBALANCE_CAUSES)."""

    def group_members(self, group_id: str, members: int) -> None:
        """`group_id` now has `members` members (0: empty, deleted or expired)."""


NO_EVENTS = CoordinatorEvents()
