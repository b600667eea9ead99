"""ConsumerGroupManager: the consumer groups (KIP-848) of one `__consumer_offsets` shard.

It owns the groups, their timers (session and rebalance timeouts) and one queue of operations per
group: an operation computes records from the group as the log has it, and the next operation on that
group starts only once those records are durable and replayed (or failed). So two heartbeats of one
group never compute from the same state, and what is in memory is exactly what the log says.
"""
from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from coordinator.config import GroupConfig
from coordinator.consumer import records as r
from coordinator.consumer.consumer_group import ConsumerGroup, PartitionOwnedTwice
from coordinator.consumer.member import UNREVOKED_PARTITIONS
from coordinator.consumer.topics_image import NO_TOPICS, TopicsImage
from coordinator.core import map_write_error
from coordinator.events import CoordinatorEvents
from coordinator.timers import Clock, Timer
from protocol.errors import DecodeError, ErrorCode

Write = Callable[[list, Callable[[ErrorCode], None]], None]


class GroupError(Exception):
    """An operation refused: the error code and message the client gets; nothing is written."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


# An operation: () -> (records, result, after) or raises GroupError. `after` runs once the records are
# durable and replayed (timers, events), before the result is handed to the callback.
Operation = Callable[[], tuple[list, Any, Callable[[], None] | None]]


class ConsumerGroupManager:
    def __init__(self, partition_name: str, config: GroupConfig, clock: Clock, timer: Timer,
                 log: logging.Logger, events: CoordinatorEvents, write: Write,
                 topics: TopicsImage = NO_TOPICS) -> None:
        self.partition_name = partition_name
        self.config = config
        self.clock = clock
        self.timer = timer
        self.log = log
        self.events = events
        self.write = write
        self.topics = topics
        self.groups: dict[str, ConsumerGroup] = {}
        self._lanes: dict[str, deque] = {}
        self.live = False
        # group id -> None (no classic group of that id), True (an empty one), False (one with members)
        self.classic_group_is_empty: Callable[[str], bool | None] = lambda _group_id: None
        from coordinator.consumer.heartbeat import ConsumerGroupHeartbeat  # it uses this module's names
        self.heartbeats = ConsumerGroupHeartbeat(self)

    # ------------------------------------------------------------ replay

    def replay(self, key: bytes, value: bytes | None) -> None:
        try:
            record = r.decode(key, value)
        except DecodeError as e:
            self.log.warning("Skipping undecodable consumer group record: %s", e)
            return
        group = self.groups.get(record.group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[record.group_id] = ConsumerGroup(record.group_id)
        try:
            group.replay(record)
        except PartitionOwnedTwice as e:  # a log written by a faulty coordinator: keep loading, say so
            self.log.error("%s", e)
        if record.type == r.GROUP_METADATA and value is None and group.is_empty():
            del self.groups[record.group_id]

    def load(self, records: dict[bytes, bytes]) -> None:
        """A loaded partition's surviving consumer group records (raw key -> value); by record type, so
        a member's subscription comes before its assignment."""
        for key in sorted(records, key=lambda k: k[:2]):
            self.replay(key, records[key])

    def on_loaded(self) -> None:
        """Every member gets a fresh session (those gone expire); revocations in progress a fresh
        rebalance timeout (Kafka's GroupMetadataManager.onLoaded)."""
        self.live = True
        for group in self.groups.values():
            for member in group.members.values():
                self.heartbeats.schedule_session_timeout(group.group_id, member.member_id)
                if member.state == UNREVOKED_PARTITIONS:
                    self.heartbeats.schedule_rebalance_timeout(group.group_id, member)

    def on_unloaded(self) -> int:
        gone = len(self.groups)
        for group in self.groups.values():
            for member_id in group.members:
                self.heartbeats.cancel_timers(group.group_id, member_id)
        for lane in self._lanes.values():
            for _op, callback, failure in lane:
                callback(failure(ErrorCode.NOT_COORDINATOR, None))
        self._lanes.clear()
        self.groups.clear()
        self.live = False
        return gone

    # ------------------------------------------------------------ operations, one group at a time

    def submit(self, group_id: str, op: Operation, callback: Callable[[Any], None],
               failure: Callable[[ErrorCode, str | None], Any]) -> None:
        lane = self._lanes.get(group_id)
        if lane is not None:
            lane.append((op, callback, failure))
            return
        self._lanes[group_id] = deque()
        self._run(group_id, op, callback, failure)

    def _run(self, group_id: str, op: Operation, callback, failure) -> None:
        while True:
            try:
                records, result, after = op()
            except GroupError as e:
                callback(failure(e.error, e.message))
                records = None
            if records:
                self.write(records, self._on_written(group_id, result, after, callback, failure))
                return
            if records is not None:
                if after is not None:
                    after()
                callback(result)
            lane = self._lanes.get(group_id)
            if not lane:
                self._lanes.pop(group_id, None)
                return
            op, callback, failure = lane.popleft()

    def _on_written(self, group_id: str, result, after, callback, failure) -> Callable[[ErrorCode], None]:
        return lambda error: self._written(group_id, error, result, after, callback, failure)

    def busy(self, group_id: str) -> bool:
        """A write of the group is in flight (its state is about to change)."""
        return group_id in self._lanes

    def _written(self, group_id: str, error: ErrorCode, result, after, callback, failure) -> None:
        if error == ErrorCode.NONE:
            if after is not None and self.live:  # an unloaded shard schedules no timers
                after()
            callback(result)
        else:
            self.log.warning("Writing records of consumer group %s failed: %s", group_id, error.name)
            callback(failure(map_write_error(error), None))
        lane = self._lanes.get(group_id)
        if not lane:
            self._lanes.pop(group_id, None)
            return
        op, callback, failure = lane.popleft()
        self._run(group_id, op, callback, failure)
