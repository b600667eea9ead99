"""Classic members (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) living in a consumer group, as Kafka 4's
GroupMetadataManager serves them: classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup,
classicGroupHeartbeatToConsumerGroup, classicGroupLeaveToConsumerGroup.

A classic member is a ConsumerGroupMember with ClassicMemberMetadata. Its JoinGroup is a full heartbeat
(subscription and owned partitions from its embedded consumer protocol): it may bump the group epoch,
compute a new target and moves the member one reconciliation step; the response's generation is the
member epoch. SyncGroup hands it its assigned partitions in its protocol's format. Heartbeat answers
REBALANCE_IN_PROGRESS whenever it must rejoin to move on (the group epoch moved, it has partitions to
revoke, or partitions it waits for were freed). Join and sync timeouts (its rebalance timeout) fence it.
"""
from __future__ import annotations

from kcoord.coordinator.consumer import migration
from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.coordinator.consumer.context import ConsumerContext
from kcoord.coordinator.consumer.errors import GroupError
from kcoord.coordinator.consumer.heartbeat import ConsumerGroupHeartbeat
from kcoord.coordinator.consumer.member import (
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ClassicMemberMetadata,
    ConsumerGroupMember,
)
from kcoord.coordinator.results import JoinGroupResult, LeaveGroupResult, LeaveMemberResult, SyncGroupResult
from kcoord.protocol.errors import DecodeError, ErrorCode

E = ErrorCode
PROTOCOL_TYPE = "consumer"
CLASSIC_GROUP = object()  # an op's result: no consumer group (any more), the classic path serves it


def _validate_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
    else:
        member = group.static_member(instance_id)
        if member is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a member of group "
                                                  f"{group.group_id}.")
        if member.member_id != member_id:
            raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was "
                                                   f"fenced by member {member.member_id}.")
    if member.classic is None:
        raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
    return member


class PendingHeartbeat:
    """A classic Heartbeat to a consumer group that has a write in flight. Kafka serves Heartbeat as a write
    operation (GroupCoordinatorService.heartbeat: scheduleWriteOperation) that produces no records, and its
    CoordinatorRuntime answers such an operation only once the writes before it are committed, computed from
    the state they make. Here it queues behind the group's write and is answered once that is durable and
    replayed; `then(callback)` gets the ErrorCode."""

    __slots__ = ("error", "_callbacks")

    def __init__(self) -> None:
        self.error: ErrorCode | None = None
        self._callbacks: list = []

    def __call__(self, error: ErrorCode) -> None:
        if self.error is not None:  # the first answer counts
            return
        self.error = error
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(error)

    def then(self, callback) -> None:
        if self.error is not None:
            callback(self.error)
        else:
            self._callbacks.append(callback)


class ClassicMembers:
    """The classic members' requests to consumer groups. `context`: the shard's consumer groups
    (ConsumerGroupManager); `heartbeats`: the consumer-protocol steps a classic JoinGroup shares (updating
    the member, fencing, session timeouts)."""

    def __init__(self, context: ConsumerContext, heartbeats: ConsumerGroupHeartbeat) -> None:
        self.m = context
        self.heartbeats = heartbeats
        self._join_timers: set[tuple[str, str]] = set()

    # ------------------------------------------------------------ JoinGroup

    def join(self, join, callback) -> None:
        """`join`: a kcoord.coordinator.join.JoinRequest. Answers CLASSIC_GROUP if the id holds no consumer group
        with members (once an empty one's tombstones are durable): the classic path then serves it."""
        fail = lambda e, msg: JoinGroupResult(e, join.member_id)  # noqa: E731
        self.m.submit(join.group_id, lambda: self._join(join), callback, fail)

    def _join(self, join):
        m, gid = self.m, join.group_id
        group = m.groups.get(gid)
        if group is None:
            return [], CLASSIC_GROUP, None
        if group.is_empty():  # GroupMetadataManager.maybeDeleteEmptyConsumerGroup: a classic group takes the id
            return m.deletion_records(group), CLASSIC_GROUP, None
        is_unknown = join.member_id == ""
        member_id = join.member_id or self.heartbeats.new_member_id()
        if len(group.members) >= m.config.consumer_group_max_size and member_id not in group.members:
            raise GroupError(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of "
                                                       f"{m.config.consumer_group_max_size} members.")
        if not group.supports_classic_protocols(join.protocol_type, {name for name, _ in join.protocols}):
            raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
        if is_unknown and join.require_known_member_id:
            m.log.info("[GroupId %s] Dynamic member with unknown member id joins the consumer group. Created a new "
                       "member id %s and requesting the member to rejoin with this id.", gid, member_id)
            return [], JoinGroupResult(E.MEMBER_ID_REQUIRED, member_id), None
        records: list = []
        member, replaced = self._member(group, member_id, join.group_instance_id, is_unknown, records)
        try:
            subscription = migration.parse_subscription(join.protocols[0][1])
        except DecodeError:
            raise GroupError(E.UNKNOWN_SERVER_ERROR, "Malformed embedded consumer protocol.") from None
        updated = member.replace(
            instance_id=join.group_instance_id if join.group_instance_id is not None else member.instance_id,
            rack_id=getattr(subscription, "rack_id", None) or member.rack_id,
            rebalance_timeout_ms=join.rebalance_timeout_ms if join.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=frozenset(subscription.topics or ()),
            client_id=join.client_id, client_host=join.client_host,
            classic=ClassicMemberMetadata(join.session_timeout_ms,
                                          tuple((name, bytes(data)) for name, data in join.protocols)))
        joined = member.member_id not in group.members and replaced is None
        owned = migration.owned_partitions(subscription, m.topics)
        reconciled, cause, _refresh = self.heartbeats.update_member(group, member, updated, replaced, owned, records,
                                                                 joined)  # (classic members have no regex)
        result = JoinGroupResult(E.NONE, reconciled.member_id, reconciled.member_epoch, PROTOCOL_TYPE,
                                 join.protocols[0][0])
        if replaced is not None and migration.validate_online_downgrade_with_replaced_member(m, group, replaced):
            # the classic static member replaces the last consumer-protocol member: back to a classic group
            records += migration.downgrade_records(m, group, replaced, reconciled)
            changed = updated.subscription() != member.subscription()
            return records, result, lambda: migration.after_downgrade(m, group, rebalance_too=changed)

        def after() -> None:
            self.cancel_join_timeout(gid, reconciled.member_id)
            self.heartbeats.schedule_session_timeout(gid, reconciled.member_id, join.session_timeout_ms)
            m.timer.schedule(("consumer-sync", gid, reconciled.member_id), max(join.rebalance_timeout_ms, 0),
                             lambda: self.heartbeats.expire(gid, reconciled.member_id, "sync_timeout", None))
            if replaced is not None:
                self.m.cancel_member_timers(gid, replaced)
            if cause is not None:
                m.events.rebalance(gid, cause)
            g = m.groups.get(gid)
            m.events.group_members(gid, len(g.members) if g else 0)

        return records, result, after

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None, is_unknown: bool,
                records: list) -> tuple[ConsumerGroupMember, str | None]:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for a classic member:
        (the member, the id of a static member it replaces)."""
        gid = group.group_id
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                self.m.log.info("[GroupId %s] Member %s joins the consumer group using the classic protocol.",
                                gid, member_id)
                member = ConsumerGroupMember(member_id)
            return member, None
        existing = group.static_member(instance_id)
        if not is_unknown:
            if existing is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if existing.member_id != member_id:
                raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                                                       f"was fenced by member {existing.member_id}.")
            return existing, None
        if existing is None:
            return ConsumerGroupMember(member_id), None
        new = existing.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records += r.member_removal(gid, existing.member_id)
        records += [r.member_subscription_record(gid, new),
                    r.target_member_record(gid, member_id, group.target_assignment.get(existing.member_id, {})),
                    r.current_assignment_record(gid, new)]
        self.m.log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group using the "
                        "classic protocol. Created a new member %s to replace the existing member %s.", gid,
                        instance_id, member_id, existing.member_id)
        return new, existing.member_id

    # ------------------------------------------------------------ SyncGroup

    def sync(self, request, version: int, callback) -> None:
        fail = lambda e, msg: SyncGroupResult(e)  # noqa: E731
        self.m.submit(request.group_id, lambda: self._sync(request, version), callback, fail)

    def _sync(self, request, version: int):
        m, gid = self.m, request.group_id
        group = m.groups.get(gid)
        if group is None:
            return [], CLASSIC_GROUP, None
        if group.is_empty():
            raise GroupError(E.UNKNOWN_MEMBER_ID)
        member = _validate_member(group, request.member_id, request.group_instance_id if version >= 3 else None)
        if request.generation_id != member.member_epoch:
            raise GroupError(E.ILLEGAL_GENERATION, f"The request generation id {request.generation_id} is not equal "
                                                   f"to the member epoch {member.member_epoch} of member "
                                                   f"{member.member_id}.")
        protocol_type = request.protocol_type if version >= 5 else None
        protocol_name = request.protocol_name if version >= 5 else None
        if protocol_type is not None and protocol_type != PROTOCOL_TYPE:
            raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL)
        if protocol_name is not None and protocol_name != member.classic.supported_protocols[0][0]:
            raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL)
        self._throw_if_rebalance_in_progress(group, member)
        version_of = migration.protocol_version(member.classic.supported_protocols[0][1])
        assignment = migration.assignment_to_bytes(member.assigned_partitions, m.topics, version_of)
        member_id, timeout = member.member_id, member.classic.session_timeout_ms

        def after() -> None:
            m.timer.cancel(("consumer-sync", gid, member_id))
            self.heartbeats.schedule_session_timeout(gid, member_id, timeout)

        return [], SyncGroupResult(E.NONE, protocol_type, protocol_name, assignment), after

    def _throw_if_rebalance_in_progress(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """The group epoch moved on: the member must rejoin (unless it is still revoking)."""
        if group.group_epoch > member.member_epoch and member.state != UNREVOKED_PARTITIONS:
            self.schedule_join_timeout_if_absent(group.group_id, member)
            raise GroupError(E.REBALANCE_IN_PROGRESS, f"A new rebalance is triggered in group {group.group_id} "
                                                      f"and member {member.member_id} should rejoin to catch up.")

    # ------------------------------------------------------------ Heartbeat

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
                  ) -> ErrorCode:
        """Kafka's classicGroupHeartbeatToConsumerGroup: it writes nothing. With no write of the group in
        flight it is answered at once from the group as the log has it; else see heartbeat_or_pending."""
        try:
            member = _validate_member(group, member_id, instance_id)
        except GroupError as e:
            return e.error
        if generation_id != member.member_epoch:
            return E.ILLEGAL_GENERATION
        self.heartbeats.schedule_session_timeout(group.group_id, member.member_id, member.classic.session_timeout_ms)
        if (member.member_epoch < group.group_epoch or member.state == UNREVOKED_PARTITIONS
                or (member.state == UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member))):
            self.schedule_join_timeout_if_absent(group.group_id, member)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def heartbeat_or_pending(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                             classic_heartbeat) -> ErrorCode | PendingHeartbeat:
        """With no write of the group in flight, the answer at once. Else a PendingHeartbeat: queued behind those
        writes, answered from the group they leave once durable; by `classic_heartbeat` (the classic group's
        answer, same arguments) if the id then holds no consumer group (e.g. a downgrade was in flight)."""
        group = self.m.groups.get(group_id)
        if group is not None and not self.m.busy(group_id):
            return self.heartbeat(group, member_id, instance_id, generation_id)
        pending = PendingHeartbeat()

        def op():
            group = self.m.groups.get(group_id)
            if group is None:
                return [], CLASSIC_GROUP, None
            return [], self.heartbeat(group, member_id, instance_id, generation_id), None

        def answer(result) -> None:
            pending(classic_heartbeat(group_id, member_id, instance_id, generation_id) if result is CLASSIC_GROUP
                    else result)

        self.m.submit(group_id, op, answer, lambda error, _message: error)
        return pending if pending.error is None else pending.error

    # ------------------------------------------------------------ LeaveGroup

    def leave(self, group_id: str, members: list[tuple[str, str | None, str | None]], callback) -> None:
        self.m.submit(group_id, lambda: self._leave(group_id, members), callback,
                      lambda e, msg: LeaveGroupResult(e))

    def _leave(self, gid: str, members: list[tuple[str, str | None, str | None]]):
        """Kafka 4's classicGroupLeaveToConsumerGroup (KAFKA-18188): any member may be named, whichever
        protocol it uses -- by member id, or by instance id (member id "" is an admin's removal, e.g.
        kafka-consumer-groups --delete / Admin.removeMembersFromConsumerGroup); each answer echoes the
        request's identity. The members named validly are then fenced together (consumerGroupFenceMembers)."""
        group = self.m.groups.get(gid)
        if group is None:
            return [], CLASSIC_GROUP, None
        results: list[LeaveMemberResult] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for member_id, instance_id, reason in members:
            why = "not provided" if reason is None else reason
            try:
                if instance_id is None:
                    member = group.members.get(member_id)
                    if member is None:
                        raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
                    self.m.log.info("[GroupId %s] Dynamic member %s has left group through explicit `LeaveGroup` "
                                    "request; client reason: %s", gid, member_id, why)
                else:
                    member = group.static_member(instance_id)
                    if member is None:
                        raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                    if member_id != "" and member.member_id != member_id:
                        raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                                               f"{instance_id} was fenced by member {member.member_id}.")
                    self.m.log.info("[GroupId %s] Static member %s with instance id %s has left group through "
                                    "explicit `LeaveGroup` request; client reason: %s", gid, member_id, instance_id,
                                    why)
            except GroupError as e:
                results.append(LeaveMemberResult(member_id, instance_id, e.error))
                continue
            results.append(LeaveMemberResult(member_id, instance_id, E.NONE))
            leaving[member.member_id] = member
        return self.fence_members(group, leaving, LeaveGroupResult(E.NONE, results))

    def fence_members(self, group: ConsumerGroup, leaving: dict[str, ConsumerGroupMember], result):
        """Kafka's consumerGroupFenceMembers: nothing named, nothing written; the last members using the
        consumer protocol leaving classic ones behind: the downgrade; else their records go, regexes no one
        uses any more are deleted, the subscription metadata follows, and the group epoch is bumped once."""
        if not leaving:
            return [], result, None
        m, gid, ids = self.m, group.group_id, set(leaving)
        if migration.validate_online_downgrade_with_fenced_members(m, group, ids):
            return migration.downgrade_records(m, group, ids), result, lambda: migration.after_downgrade(m, group)
        records: list = []
        for member_id in leaving:
            records += r.member_removal(gid, member_id)
        records += self.heartbeats.regex_tombstones(group, exclude=ids, new=None)
        metadata = self.heartbeats.subscription_metadata(group, exclude=ids, new=None)
        if metadata != group.subscription_metadata:
            records.append(r.subscription_metadata_record(gid, metadata))
        first = next(iter(leaving))
        records.append(r.group_epoch_record(gid, group.group_epoch + 1, "member_left",
                                            f"Members {list(leaving)} left the group.", first))

        def after() -> None:
            for member_id in leaving:
                self.m.cancel_member_timers(gid, member_id)
            m.events.rebalance(gid, "member_left")
            g = m.groups.get(gid)
            m.events.group_members(gid, len(g.members) if g else 0)

        return records, result, after

    # ------------------------------------------------------------ timers

    def schedule_join_timeout_if_absent(self, group_id: str, member: ConsumerGroupMember) -> None:
        key = (group_id, member.member_id)
        if key in self._join_timers:
            return
        self._join_timers.add(key)

        def expired() -> None:
            self._join_timers.discard(key)
            self.heartbeats.expire(group_id, member.member_id, "join_timeout", None)

        self.m.timer.schedule(("consumer-join",) + key, max(member.rebalance_timeout_ms, 0), expired)

    def cancel_join_timeout(self, group_id: str, member_id: str) -> None:
        self._join_timers.discard((group_id, member_id))
        self.m.timer.cancel(("consumer-join", group_id, member_id))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.cancel_join_timeout(group_id, member_id)
        self.m.timer.cancel(("consumer-sync", group_id, member_id))
