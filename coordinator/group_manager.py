"""GroupMetadataManager: the classic groups of one `__consumer_offsets` partition (shard).

It owns the groups (members, static members, pending members), the parked JoinGroup/SyncGroup
continuations (kcoord.coordinator.parked), the join purgatory and the groups' timers. The protocol's steps
live in one module each, composed here: join.py (ClassicJoin), static_member.py, sync.py
(ClassicSync), membership.py (Heartbeat, LeaveGroup), rebalance.py (Rebalancer). Each step gets this
manager as its `ClassicContext` (classic_context.py) and the steps it calls, so imports point one way:
this module -> join -> static_member -> rebalance -> purgatory (sync and membership -> rebalance).

Membership and the rebalance state machine are in memory only, as in Kafka. What is in the log is
the group after a generation (its GroupMetadata record) and its deletion (a tombstone); that part of
a group changes only by `replay_group_metadata`, after the record is durable, live and on load alike.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kcoord.coordinator.classic_context import Write
from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.consumer_protocol import subscription_topics
from kcoord.coordinator.events import CoordinatorEvents
from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.join import ClassicJoin
from kcoord.coordinator.membership import ClassicMembership
from kcoord.coordinator.parked import ParkedRequests
from kcoord.coordinator.purgatory import JoinPurgatory
from kcoord.coordinator.rebalance import Rebalancer
from kcoord.coordinator.replay import group_from_metadata_value
from kcoord.coordinator.results import (
    DescribedGroup,
    DescribedMember,
    JoinGroupResult,
    ListedGroup,
    SyncGroupResult,
)
from kcoord.coordinator.static_member import StaticMembership
from kcoord.coordinator.sync import ClassicSync
from kcoord.coordinator.timers import Clock, Timer
from kcoord.protocol.consumer_offsets import GroupMetadataValue
from kcoord.protocol.errors import ErrorCode

S = GroupState


class GroupMetadataManager:
    def __init__(self, partition_name: str, config: GroupConfig, clock: Clock, timer: Timer,
                 log: logging.Logger, events: CoordinatorEvents, write: Write) -> None:
        self.topic_partition_name = partition_name
        self.config = config
        self.clock = clock
        self.timer = timer
        self.log = log
        self.events = events
        self.write = write  # the shard's: append, and once durable replay, then call back
        self.live = False   # False while the shard loads: a GroupMetadata record then rebuilds its group
        self.groups: dict[str, GroupMetadata] = {}
        self.parked = ParkedRequests()
        self.join_purgatory = JoinPurgatory(timer)
        # The steps, each given this manager as its ClassicContext and the steps it calls (one way down).
        self.rebalance = Rebalancer(self)
        self.static_members = StaticMembership(self, self.rebalance)
        self.joins = ClassicJoin(self, self.rebalance, self.static_members)
        self.syncs = ClassicSync(self, self.rebalance)
        self.membership = ClassicMembership(self, self.rebalance)
        self.is_consumer_group: Callable[[str], bool] = lambda _group_id: False  # the shard's consumer groups

    def now_ms(self) -> int:
        return self.clock.now_ms()

    # ------------------------------------------------------------ groups

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def get_or_maybe_create_group(self, group_id: str, create_if_not_exist: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create_if_not_exist:
            group = self.groups[group_id] = GroupMetadata(group_id, self.now_ms())
        return group

    def group_if_current(self, group: GroupMetadata) -> bool:
        """Timers hold the group object; it is only acted on if it is still the one registered."""
        return self.groups.get(group.group_id) is group and not group.is_(S.DEAD)

    # ------------------------------------------------------------ replay

    def replay_group_metadata(self, group_id: str, value: GroupMetadataValue | None) -> None:
        """Apply a durable GroupMetadata record (None: its tombstone).

        Live, the record describes the group it was written from: it becomes the group's stored value and
        its assignments those of the members it names (when the generation is still the record's).
        While loading, or for a group no longer in memory, the group is rebuilt from the record. A
        tombstone forgets the stored value; the group itself goes unless members joined it meanwhile
        (they are not in the log yet: their next generation's record will be)."""
        group = self.groups.get(group_id)
        if value is None:
            if group is not None:
                group.stored = None
                if not group.members:
                    self._drop(group)
            return
        if group is None or not self.live:
            if group is not None:
                self._drop(group)
            group = self.groups[group_id] = group_from_metadata_value(group_id, value, self.now_ms())
        elif group.generation_id == value.generation:
            for m in value.members:
                member = group.members.get(m.member_id)
                if member is not None:
                    member.assignment = m.assignment
        group.stored = value

    def ensure_group(self, group_id: str) -> None:
        """An offset commit for a group that does not exist makes it a simple group (Kafka's
        OffsetMetadataManager.replay): Empty, without a protocol type."""
        if group_id not in self.groups and not self.is_consumer_group(group_id):
            self.groups[group_id] = GroupMetadata(group_id, self.now_ms())

    def drop_upgraded(self, group_id: str) -> None:
        """A consumer group took the id (online upgrade): the classic group goes; its parked requests are
        told to rejoin (Kafka's convertToConsumerGroup: completeAllJoinFutures(REBALANCE_IN_PROGRESS))."""
        group = self.groups.get(group_id)
        if group is not None:
            self.log.info("Classic group %s was upgraded to a consumer group", group_id)
            self._drop(group, ErrorCode.REBALANCE_IN_PROGRESS)

    def _drop(self, group: GroupMetadata, answer: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE) -> None:
        """Forget `group`: parked requests answered with `answer`, its timers cancelled, Dead."""
        for member in group.all_member_metadata():
            self.parked.complete_join(group, member, JoinGroupResult(answer, member.member_id))
            self.parked.complete_sync(group, member, SyncGroupResult(answer))
            self.rebalance.remove_heartbeat_for_leaving_member(group, member.member_id)
        for member_id in group.pending_members:
            self.rebalance.remove_heartbeat_for_leaving_member(group, member_id)
        self.rebalance.remove_sync_expiration(group)
        op = self.join_purgatory.watched(group.group_id)
        if op is not None:
            self.join_purgatory.unwatch(group.group_id, op)
        if not group.is_(S.DEAD):
            group.transition_to(S.DEAD, self.now_ms())
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # ------------------------------------------------------------ loading and unloading

    def on_loaded(self) -> None:
        """The shard's records are replayed: restored members get a fresh session (those that are gone
        will expire), and a group over group.max.size rebalances."""
        self.live = True
        for group in self.groups.values():
            for member in group.all_member_metadata():
                self.rebalance.complete_and_schedule_next_heartbeat_expiration(group, member)
            if group.size > self.config.group_max_size:
                self.rebalance.prepare_rebalance(
                    group, f"Freshly-loaded group is over capacity ({self.config.group_max_size}). "
                           "Rebalancing in order to give a chance for consumers to commit offsets", "group_max_size")

    def on_moved_here(self) -> None:
        """The shard was loaded by a newly elected coordinator (cluster mode): each group's first rebalance
        within its members' longest session timeout records the cause "coordinator_moved"."""
        now = self.clock.now_ms()
        for group in self.groups.values():
            session = max((m.session_timeout_ms for m in group.all_member_metadata()), default=0)
            group.moved_until_ms = now + max(session, group.rebalance_timeout_ms())

    def on_unloaded(self) -> int:
        """The shard is given up: every group goes Dead, parked requests are told NOT_COORDINATOR."""
        gone = list(self.groups.values())
        for group in gone:
            self._drop(group, ErrorCode.NOT_COORDINATOR)
        self.live = False
        return len(gone)

    # ------------------------------------------------------------ DescribeGroups, ListGroups, DeleteGroups

    def describe_group(self, group_id: str, request_version: int) -> DescribedGroup:
        """Member metadata and assignments only in Stable. An unknown group is "Dead" with NONE, except
        from v6 (KIP-1043) where it is GROUP_ID_NOT_FOUND."""
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            err = ErrorCode.GROUP_ID_NOT_FOUND if request_version >= 6 else ErrorCode.NONE
            return DescribedGroup(group_id, err, str(S.DEAD), "", "")
        stable = group.is_(S.STABLE)
        protocol = (group.protocol_name or "") if stable else ""
        members = [DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.metadata(protocol) if stable else b"", m.assignment if stable else b"")
                   for m in group.all_member_metadata()]
        return DescribedGroup(group_id, ErrorCode.NONE, str(group.state), group.protocol_type or "", protocol,
                              members)

    def list_groups(self, states_filter: Iterable[str] | None = None) -> list[ListedGroup]:
        wanted = {s.lower() for s in states_filter} if states_filter else None
        return [ListedGroup(g.group_id, g.protocol_type or "", str(g.state)) for g in self.groups.values()
                if wanted is None or g.state.lower_name in wanted]

    def validate_delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_(S.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        return ErrorCode.NONE


def subscribed_topics(group: GroupMetadata) -> set[str] | None:
    """Topics a consumer-protocol group reads, from its members' subscriptions; None if unknown."""
    if group.protocol_type != "consumer":
        return None
    if not group.members:
        return set()
    if group.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        try:
            got = subscription_topics(member.metadata(group.protocol_name))
        except KeyError:
            return None
        if got is None:
            return None
        topics |= got
    return topics
