"""What the consumer group steps use of the shard's consumer groups: `ConsumerContext`.

ConsumerGroupManager (manager.py) owns that state -- the groups, their queues of operations, the timers --
and composes the steps, passing itself as their context and each step the steps it calls; a step sees the
manager only through this protocol, so no step imports it back. Imports point one way:

    manager ─▶ classic_members ─▶ heartbeat ─▶ migration
               (classic JoinGroup,      (ConsumerGroupHeartbeat,    (upgrade, downgrade)
                SyncGroup, Heartbeat,    fencing, the members'
                LeaveGroup)              session / rebalance timers)
               heartbeat ─▶ regex_refresh ─▶ subscriptions     (steady.py: the steady heartbeat, a leaf)

and each of them ─▶ context (this module) ─▶ errors (GroupError and the other exceptions, a leaf).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.coordinator.consumer.topics_image import TopicsImage
from kcoord.coordinator.events import CoordinatorEvents
from kcoord.coordinator.timers import Clock, Timer
from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kcoord.coordinator.group_manager import GroupMetadataManager

Write = Callable[[list, Callable[[ErrorCode], None]], None]
# An operation: () -> (records, result, after) or raises errors.GroupError. `after` runs once the records
# are durable and replayed (timers, events), before the result is handed to the callback.
Operation = Callable[[], tuple[list, Any, Callable[[], None] | None]]


class ConsumerContext(Protocol):
    """The state and operations of one shard's consumer groups that the steps may use."""

    partition_name: str                      # "__consumer_offsets-N", for the log
    config: GroupConfig
    clock: Clock
    timer: Timer                             # keyed, replaceable timers on the injected clock
    log: logging.Logger
    events: CoordinatorEvents                # rebalances and group sizes, for metrics
    topics: TopicsImage                      # the topics the groups may subscribe to
    groups: dict[str, ConsumerGroup]         # the groups table itself (never rebound)
    live: bool                               # loaded and serving (an unloaded shard schedules no timers)
    # the shard's classic groups: online migration reads a classic group to upgrade it, and hands a
    # downgraded group's members over to it (None in a manager used alone)
    group_manager: GroupMetadataManager | None

    def submit(self, group_id: str, op: Operation, callback: Callable[[Any], None],
               failure: Callable[[ErrorCode, str | None], Any]) -> None:
        """Run `op` once the group's earlier operations are durable; `callback(result)` once its records
        are (or `callback(failure(error, message))`)."""

    def busy(self, group_id: str) -> bool:
        """A write of the group is in flight (its state is about to change)."""

    def deletion_records(self, group: ConsumerGroup) -> list:
        """The tombstones deleting an empty consumer group (and a stale classic value of its id)."""

    def cancel_member_timers(self, group_id: str, member_id: str) -> None:
        """Cancel every timer of a member: session and rebalance timeouts, a classic member's join and sync."""
