"""ShareGroupManager: the share groups (KIP-932) of one `__consumer_offsets` shard -- the group side
(membership and assignment); the share-partition state lives with the share coordinator (kcoord.share).

It owns the groups and their members' session timers, and runs one operation per group at a time: an
operation computes records from the group as the log has it (heartbeat.py), writes them, and the next
one of that group starts once they are durable and replayed (or failed). A share group changes only by
`replay` (share_group.py), live and on load alike.
"""
from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.consumer.errors import GroupError
from kcoord.coordinator.consumer.topics_image import NO_TOPICS, TopicsImage
from kcoord.coordinator.core import map_write_error
from kcoord.coordinator.events import CoordinatorEvents
from kcoord.coordinator.results import RequestContext
from kcoord.coordinator.share import assignor
from kcoord.coordinator.share import heartbeat as hb
from kcoord.coordinator.share import records as r
from kcoord.coordinator.share.share_group import ShareGroup
from kcoord.coordinator.timers import Clock, Timer
from kcoord.protocol.errors import DecodeError, ErrorCode

Write = Callable[[list, Callable[[ErrorCode], None]], None]
# () -> (records, result); raises GroupError
Operation = Callable[[], tuple[list, object]]


def _never_other(group_id: str) -> bool:
    return False


def _nothing() -> None:
    pass


class ShareGroupManager:
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
        self.groups: dict[str, ShareGroup] = {}
        self._lanes: dict[str, deque] = {}
        self.live = False
        # the shard answers whether a classic or consumer group holds an id (group-type exclusivity)
        self.is_other_group: Callable[[str], bool] = _never_other
        # called once when the first share group appears (the shard then checks ConsumerGroupHeartbeat ids)
        self.on_first_group: Callable[[], None] = _nothing

    # ------------------------------------------------------------ replay

    def replay(self, key: bytes, value: bytes | None) -> None:
        try:
            record = r.decode(key, value)
        except DecodeError as e:
            self.log.warning("Skipping undecodable share group record: %s", e)
            return
        self.replay_record(record)

    def replay_record(self, record: r.ShareRecord) -> None:
        group = self.groups.get(record.group_id)
        if group is None:
            if record.value is None:
                return
            group = self.groups[record.group_id] = ShareGroup(record.group_id)
            self.on_first_group()
        group.replay(record)
        if record.type == r.GROUP_METADATA and record.value is None and group.is_empty():
            del self.groups[record.group_id]

    def load(self, records: dict[bytes, bytes]) -> None:
        """A loaded partition's surviving share group records (raw key -> value), by record type."""
        for key in sorted(records, key=lambda k: k[:2]):
            self.replay(key, records[key])

    def on_loaded(self) -> None:
        """Every member gets a fresh session (Kafka's onLoaded): those gone expire."""
        self.live = True
        for group in self.groups.values():
            for member_id in group.members:
                self.schedule_session_timeout(group.group_id, member_id)

    def on_unloaded(self) -> int:
        gone = len(self.groups)
        for group in self.groups.values():
            for member_id in group.members:
                self.timer.cancel(self._session_key(group.group_id, member_id))
        for lane in self._lanes.values():
            for _op, callback, failure in lane:
                callback(failure(ErrorCode.NOT_COORDINATOR, None))
        self._lanes.clear()
        self.groups.clear()
        self.live = False
        return gone

    # ------------------------------------------------------------ ShareGroupHeartbeat

    def heartbeat(self, context: RequestContext, request, callback: Callable[[hb.ShareHeartbeatResult], None]) -> None:
        """shareGroupHeartbeat (or shareGroupLeave for epoch -1), once the group's earlier writes are durable."""
        def failure(error: ErrorCode, message: str | None) -> hb.ShareHeartbeatResult:
            return hb.ShareHeartbeatResult(error, message)

        invalid = hb.validate(request)
        if invalid is not None:
            return callback(failure(invalid.error, invalid.message))
        gid = request.group_id

        def op():
            if gid not in self.groups and self.is_other_group(gid):
                raise hb.not_a_share_group(gid)
            group = self.groups.get(gid)
            if request.member_epoch == hb.LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(group, gid, request.member_id)
            records, result = hb.heartbeat(group, request, context.client_id, context.client_host, self.topics,
                                           self.config.share_group_max_size, self.config.share_group_heartbeat_interval_ms)
            if request.member_epoch == 0 and (group is None or request.member_id not in group.members):
                self.log.info("[GroupId %s] Member %s joins the share group.", gid, request.member_id)
                self.events.rebalance(gid, "member_joined")
            return records, result

        self.submit(gid, op, callback, failure, session=(gid, request.member_id, request.member_epoch))

    def _leave(self, group: ShareGroup | None, gid: str, member_id: str):
        """shareGroupLeave: an unknown group or member is UNKNOWN_MEMBER_ID / GROUP_ID_NOT_FOUND as Kafka's."""
        if group is None:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.")
        if member_id not in group.members:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
        self.log.info("[GroupId %s] Member %s left the share group.", gid, member_id)
        self.events.rebalance(gid, "member_left")
        return hb.fence(group, member_id), hb.ShareHeartbeatResult(ErrorCode.NONE, None, member_id,
                                                                   hb.LEAVE_GROUP_MEMBER_EPOCH)

    # ------------------------------------------------------------ session timeouts

    @staticmethod
    def _session_key(group_id: str, member_id: str) -> tuple:
        return ("share-session", group_id, member_id)

    def schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self.timer.schedule(self._session_key(group_id, member_id), self.config.share_group_session_timeout_ms,
                            lambda: self._session_expired(group_id, member_id))

    def _session_expired(self, group_id: str, member_id: str) -> None:
        """The timer looks the group and member up again: a member gone since does nothing."""
        def op():
            group = self.groups.get(group_id)
            if group is None or member_id not in group.members:
                return [], None
            self.log.info("[GroupId %s] Member %s fenced from the share group: the member session expired.",
                          group_id, member_id)
            self.events.rebalance(group_id, "session_timeout")
            return hb.fence(group, member_id), None

        self.submit(group_id, op, lambda _result: None, lambda error, message: None)

    # ------------------------------------------------------------ operations, one group at a time

    def submit(self, group_id: str, op: Operation, callback: Callable, failure: Callable,
               session: tuple[str, str, int] | None = None) -> None:
        lane = self._lanes.get(group_id)
        if lane is not None:
            lane.append((op, callback, failure, session))
            return
        self._lanes[group_id] = deque()
        self._run(group_id, op, callback, failure, session)

    def _run(self, group_id: str, op: Operation, callback, failure, session) -> None:
        while True:
            try:
                records, result = op()
            except GroupError as e:
                callback(failure(e.error, e.message))
                records = None
            if records:
                self.write(records, lambda error, done=(result, callback, failure, session):
                           self._written(group_id, error, *done))
                return
            if records is not None:
                self._after(session, result)
                callback(result)
            nxt = self._next(group_id)
            if nxt is None:
                return
            op, callback, failure, session = nxt

    def _next(self, group_id: str):
        lane = self._lanes.get(group_id)
        if not lane:
            self._lanes.pop(group_id, None)
            return None
        return lane.popleft()

    def _after(self, session, result) -> None:
        """The member's session starts again (scheduleShareGroupSessionTimeout), or ends with its leave."""
        if session is None or not self.live or result is None:
            return
        group_id, member_id, epoch = session
        if epoch == hb.LEAVE_GROUP_MEMBER_EPOCH:
            self.timer.cancel(self._session_key(group_id, member_id))
        else:
            self.schedule_session_timeout(group_id, member_id)

    def _written(self, group_id: str, error: ErrorCode, result, callback, failure, session) -> None:
        if error == ErrorCode.NONE:
            group = self.groups.get(group_id)
            self.events.group_members(group_id, 0 if group is None else len(group.members))
            self._after(session, result)
            callback(result)
        else:
            self.log.warning("Writing records of share group %s failed: %s", group_id, error.name)
            callback(failure(map_write_error(error), None))
        nxt = self._next(group_id)
        if nxt is not None:
            self._run(group_id, *nxt)

    def busy(self, group_id: str) -> bool:
        return group_id in self._lanes

    # ------------------------------------------------------------ describe, delete

    def deletion_records(self, group: ShareGroup) -> list:
        """An empty group's tombstones: any target left of a member, then the group's."""
        out = []
        for member_id in group.target:
            out += r.member_removal(group.group_id, member_id)[1:2]
        return out + r.group_deletion(group.group_id)

    def assignor_name(self) -> str:
        return assignor.NAME
