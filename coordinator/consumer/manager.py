"""ConsumerGroupManager: the consumer groups (KIP-848) of one `__consumer_offsets` shard.

It owns the groups, their timers (session and rebalance timeouts, background regex resolutions:
regex_refresh.py) and one queue of operations per
group: an operation computes records from the group as the log has it, and the next operation on that
group starts only once those records are durable and replayed (or failed). So two heartbeats of one
group never compute from the same state, and what is in memory is exactly what the log says.

It composes the steps (context.py draws the chain): each gets the manager as its ConsumerContext and
the steps it calls, so none imports this module back.
"""
from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.classic_members import ClassicMembers
from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.coordinator.consumer.context import Operation, Write
from kcoord.coordinator.consumer.describe import tombstones
from kcoord.coordinator.consumer.errors import GroupError, PartitionOwnedTwice
from kcoord.coordinator.consumer.heartbeat import ConsumerGroupHeartbeat
from kcoord.coordinator.consumer.member import UNREVOKED_PARTITIONS
from kcoord.coordinator.consumer.regex_refresh import RegexRefresh
from kcoord.coordinator.consumer.subscriptions import Subscriptions
from kcoord.coordinator.consumer.topics_image import NO_TOPICS, TopicsImage
from kcoord.coordinator.core import map_write_error
from kcoord.coordinator.events import CoordinatorEvents
from kcoord.coordinator.records import group_metadata_tombstone
from kcoord.coordinator.timers import Clock, Timer
from kcoord.protocol.errors import DecodeError, ErrorCode

if TYPE_CHECKING:
    from kcoord.coordinator.group_manager import GroupMetadataManager

# Operations of one group written as one append: at most MAX_BATCH, and no more once their records reach
# MAX_BATCH_BYTES (half Kafka's default max.message.bytes: a batch stays an ordinary append). Larger batches
# mean fewer appends to wait for while a group forms; they change no answer.
MAX_BATCH = 256
MAX_BATCH_BYTES = 512 * 1024


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
        # the shard's classic groups (kcoord.coordinator.group_manager.GroupMetadataManager): online migration
        # reads a classic group to upgrade it, and hands a downgraded group's members over to it
        self.group_manager: GroupMetadataManager | None = None
        # ids whose log holds a classic GroupMetadata value after their consumer group's records (none of
        # ours: classic requests queue behind a consumer group's write in flight); the shard ignores it,
        # live and on load alike, and deleting the consumer group deletes it too
        self.stale_classic: set[str] = set()
        self.subscriptions = Subscriptions(self)
        self.regex_refresh = RegexRefresh(self, self.subscriptions)  # regexes resolved in the background
        self.heartbeats = ConsumerGroupHeartbeat(self, self.regex_refresh)
        self.classic_members = ClassicMembers(self, self.heartbeats)

    def topic_id(self, name: str) -> uuid.UUID | None:
        """The topic's id in the current topics image (None: unknown)."""
        found = self.topics.topic(name)
        return None if found is None else found[0]

    # ------------------------------------------------------------ replay

    def replay(self, key: bytes, value: bytes | None) -> None:
        try:
            record = r.decode(key, value)
        except DecodeError as e:
            self.log.warning("Skipping undecodable consumer group record: %s", e)
            return
        self.replay_record(record)

    def replay_record(self, record: r.ConsumerRecord) -> None:
        """Replay a decoded record (one read from the log, or one we wrote: records.Written)."""
        value = record.value
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
                if member.classic is not None:  # classic members have their own session timeout
                    self.heartbeats.schedule_session_timeout(group.group_id, member.member_id,
                                                             member.classic.session_timeout_ms)
                    continue
                self.heartbeats.schedule_session_timeout(group.group_id, member.member_id)
                if member.state == UNREVOKED_PARTITIONS:
                    self.heartbeats.schedule_rebalance_timeout(group.group_id, member)
            # the group's size as loaded (heartbeats that change nothing do not report it again)
            self.events.group_members(group.group_id, len(group.members))

    def on_unloaded(self) -> int:
        gone = len(self.groups)
        for group in self.groups.values():
            for member_id in group.members:
                self.cancel_member_timers(group.group_id, member_id)
        self.regex_refresh.cancel_all()
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
        """Run `op` and whatever queued behind it (up to MAX_BATCH) as one batch: each computes from the
        group as the batch so far leaves it -- a scratch copy, replayed with the batch's records -- and
        the batch's records go out as one append. The group itself changes only when they are durable
        (the shard replays them); if the append fails, nothing changed and every op of the batch fails.
        So a burst of heartbeats costs one durable write, not one each."""
        while True:
            batch = [(op, callback, failure)]
            lane = self._lanes.get(group_id)
            while lane and len(batch) < MAX_BATCH:
                batch.append(lane.popleft())
            records, done = self._compute(group_id, batch)
            if records:
                self.write(records, lambda error, done=done: self._written(group_id, error, done))
                return
            self._answer(done)
            lane = self._lanes.get(group_id)
            if not lane:
                self._lanes.pop(group_id, None)
                return
            op, callback, failure = lane.popleft()

    def _compute(self, group_id: str, batch: list) -> tuple[list, list]:
        durable = self.groups.get(group_id)
        scratch: ConsumerGroup | None = None
        records: list = []
        done: list = []
        size = 0
        try:
            for i, (op, callback, failure) in enumerate(batch):
                if size >= MAX_BATCH_BYTES:  # the rest wait for the next append, first in line
                    self._lanes[group_id].extendleft(reversed(batch[i:]))
                    break
                try:
                    out, result, after = op()
                except GroupError as e:
                    callback(failure(e.error, e.message))
                    continue
                done.append((result, after, callback, failure))
                if not out:
                    continue
                records += out
                size += sum(len(record[0]) + len(record[1] or b"") for record in out)
                # the next op computes from the group with these records (and so, once they are durable,
                # may the group itself: _Replayed)
                if i + 1 < len(batch) or durable is not None:
                    if scratch is None:
                        scratch = durable.copy() if durable is not None else ConsumerGroup(group_id)
                        self.groups[group_id] = scratch
                    self._replay_into(scratch, out)
        finally:
            if durable is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = durable
        if durable is not None and records and _Replayed.covers(group_id, records):
            records = _Replayed(records, self, group_id, durable, scratch)
        return records, done

    def _replay_into(self, scratch: ConsumerGroup, records: list) -> None:
        for record in records:
            decoded = getattr(record, "decoded", None)  # (what we write carries it)
            if decoded is None:
                if r.record_type(record[0]) is None:
                    continue  # e.g. the tombstone of a classic group being replaced
                decoded = r.decode(record[0], record[1])
            try:
                scratch.replay(decoded)
            except PartitionOwnedTwice as e:
                self.log.error("%s", e)

    def _answer(self, done: list) -> None:
        for result, after, callback, _failure in done:
            if after is not None and self.live:  # an unloaded shard schedules no timers
                after()
            callback(result)

    def deletion_records(self, group: ConsumerGroup) -> list:
        """The tombstones deleting an empty consumer group (and a stale classic value of its id)."""
        stale = [group_metadata_tombstone(group.group_id)] if group.group_id in self.stale_classic else []
        return tombstones(group) + stale

    def cancel_member_timers(self, group_id: str, member_id: str) -> None:
        """Every timer of a member: session and rebalance timeouts, a classic member's join and sync."""
        self.heartbeats.cancel_timers(group_id, member_id)
        self.classic_members.cancel_timers(group_id, member_id)

    def busy(self, group_id: str) -> bool:
        """A write of the group is in flight (its state is about to change)."""
        return group_id in self._lanes

    def _written(self, group_id: str, error: ErrorCode, done: list) -> None:
        if error == ErrorCode.NONE:
            self._answer(done)
        else:
            self.log.warning("Writing records of consumer group %s failed: %s", group_id, error.name)
            for _result, _after, callback, failure in done:
                callback(failure(map_write_error(error), None))
        lane = self._lanes.get(group_id)
        if not lane:
            self._lanes.pop(group_id, None)
            return
        op, callback, failure = lane.popleft()
        self._run(group_id, op, callback, failure)


class _Replayed(list):
    """A batch's records when the scratch group it computed from already holds all of them: replaying
    them once durable (GroupCoordinatorShard.replay_records -> replay_into) installs that scratch group
    instead of replaying every record a second time. Only when replaying them through the manager is
    exactly replaying them into the group: every record is a consumer group record of this group, the
    group exists, none deletes it; and only if nothing else replaced the group since (else they are
    replayed one by one, as any records)."""

    def __init__(self, records: list, manager: ConsumerGroupManager, group_id: str, durable: ConsumerGroup,
                 scratch: ConsumerGroup) -> None:
        super().__init__(records)
        self.manager, self.group_id, self.durable, self.scratch = manager, group_id, durable, scratch
        self.lane = manager._lanes.get(group_id)

    @staticmethod
    def covers(group_id: str, records: list) -> bool:
        for record in records:
            decoded = getattr(record, "decoded", None)
            if decoded is None or decoded.group_id != group_id or (
                    decoded.type == r.GROUP_METADATA and decoded.value is None):
                return False
        return True

    def replay_into(self, shard) -> None:
        m, gid = self.manager, self.group_id
        if m.groups.get(gid) is not self.durable or m._lanes.get(gid) is not self.lane:
            for record in self:
                shard.replay_consumer(record.decoded)
            return
        m.groups[gid] = self.scratch
        if any(record.decoded.type == r.GROUP_METADATA for record in self):
            shard.group_manager.drop_upgraded(gid)  # (as replaying an epoch record does)
