"""What the classic protocol's steps use of the shard's classic groups: `ClassicContext`.

GroupMetadataManager (group_manager.py) owns that state and composes the steps, passing itself as
their context; a step sees it only through this protocol, so no step imports the manager back. The
steps form a one-way chain beneath it:

    group_manager ─▶ join ─▶ static_member ─▶ rebalance ─▶ purgatory
                     sync ──────────────────▶ rebalance
                     membership ────────────▶ rebalance

and each of them ─▶ classic_context (this module, which needs only leaf modules and the purgatory).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.events import CoordinatorEvents
from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.parked import ParkedRequests
from kcoord.coordinator.purgatory import JoinPurgatory
from kcoord.coordinator.records import Record
from kcoord.coordinator.timers import Timer
from kcoord.protocol.errors import ErrorCode

Write = Callable[[list[Record], Callable[[ErrorCode], None]], None]


class ClassicContext(Protocol):
    """The state and operations of one shard's classic groups that the steps may use."""

    topic_partition_name: str                # "__consumer_offsets-N", for the log
    config: GroupConfig
    timer: Timer                             # keyed, replaceable timers on the injected clock
    log: logging.Logger
    events: CoordinatorEvents                # rebalances and group sizes, for metrics
    groups: dict[str, GroupMetadata]         # the groups table itself (never rebound)
    parked: ParkedRequests                   # the parked JoinGroup / SyncGroup continuations
    join_purgatory: JoinPurgatory

    def now_ms(self) -> int: ...

    def write(self, records: list[Record], callback: Callable[[ErrorCode], None]) -> None:
        """Append `records`; once durable and replayed (or failed), `callback(error)`."""

    def get_group(self, group_id: str) -> GroupMetadata | None: ...

    def get_or_maybe_create_group(self, group_id: str, create_if_not_exist: bool) -> GroupMetadata | None: ...

    def group_if_current(self, group: GroupMetadata) -> bool:
        """Whether `group` is still the one registered under its id, and not Dead."""
