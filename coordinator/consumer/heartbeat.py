"""ConsumerGroupHeartbeat (KIP-848), as Kafka 4's GroupMetadataManager.consumerGroupHeartbeat does it.

A heartbeat (1) creates or updates the member -- a changed subscription, or changed metadata of the
subscribed topics, bumps the group epoch; (2) if the group epoch is ahead of the assignment epoch,
computes a new target assignment; (3) moves the member one reconciliation step towards its target.
Each step adds records; nothing changes until they are durable (manager.ConsumerGroupManager.submit).
Epoch -1 leaves (the member is fenced: its records are deleted and the group epoch bumped), -2 is a
static member's temporary leave (it keeps its partitions until its session expires). Session and
rebalance timeouts fence the member the same way.
"""
from __future__ import annotations

import base64
import os

from kcoord.coordinator.consumer import migration
from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.assignors import ASSIGNORS
from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.coordinator.consumer.context import ConsumerContext
from kcoord.coordinator.consumer.errors import FencedMemberEpoch, GroupError, InvalidRegex
from kcoord.coordinator.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    UNREVOKED_PARTITIONS,
    ConsumerGroupMember,
    is_subset,
)
from kcoord.coordinator.consumer.migration import MIGRATION
from kcoord.coordinator.consumer.reconciliation import reconcile
from kcoord.coordinator.consumer.regex import compile_regex
from kcoord.coordinator.consumer.regex_refresh import (
    REGEX_UPDATED,
    REGEX_UPDATED_AND_RESOLVED,
    RegexRefresh,
    update_regexes,
)
from kcoord.coordinator.consumer.steady import HeartbeatResult, steady_group, steady_heartbeat
from kcoord.coordinator.consumer.target import build_target_assignment
from kcoord.protocol.errors import ErrorCode

E = ErrorCode
_FENCE_REASONS = {"session_timeout": "the member session expired", "join_timeout": "the classic member failed to "
                  "join within the rebalance timeout", "sync_timeout": "the member failed to sync within timeout"}


def new_member_id() -> str:
    """A random id as Kafka's Uuid.toString() writes one (22 url-safe base64 characters)."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")


def _owned(request) -> list | None:
    tps = request.topic_partitions
    return None if tps is None else [(tp.topic_id, list(tp.partitions)) for tp in tps]


def validate(request, assignors: tuple[str, ...] = tuple(ASSIGNORS)) -> GroupError | None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid; `assignors`: group.consumer.assignors."""
    def invalid(message: str) -> GroupError:
        return GroupError(E.INVALID_REQUEST, message)

    if not request.group_id:
        return invalid("GroupId can't be empty.")
    if request.instance_id == "":
        return invalid("InstanceId can't be empty.")
    if request.rack_id == "":
        return invalid("RackId can't be empty.")
    regex = getattr(request, "subscribed_topic_regex", None)  # v1; "" (what librdkafka sends) means none
    if regex:
        try:
            compile_regex(regex)
        except InvalidRegex as e:
            return GroupError(E.INVALID_REGULAR_EXPRESSION, str(e))
    epoch = request.member_epoch
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not request.member_id:
            return invalid("MemberId can't be empty.")
    elif epoch == 0:
        if request.rebalance_timeout_ms == -1:
            return invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            return invalid("TopicPartitions must be empty when (re-)joining.")
        if not request.subscribed_topic_names and not regex:
            return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not request.member_id:
            return invalid("MemberId can't be empty.")
        if request.instance_id is None:
            return invalid("InstanceId can't be null.")
    else:
        return invalid("MemberEpoch is invalid.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        return GroupError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {request.server_assignor} is not supported. "
                                                  f"Supported assignors: {', '.join(assignors)}.")
    return None


class ConsumerGroupHeartbeat:
    """ConsumerGroupHeartbeat's steps, and the fencing and timers of consumer-protocol members. `context`: the
    shard's consumer groups (ConsumerGroupManager); `regex_refresh`: the background regex resolutions."""

    def __init__(self, context: ConsumerContext, regex_refresh: RegexRefresh) -> None:
        self.m = context
        self.regex_refresh = regex_refresh
        subscriptions = regex_refresh.subscriptions
        self.regex_tombstones = subscriptions.regex_tombstones
        self.subscription_metadata = subscriptions.subscription_metadata
        self.group_metadata = subscriptions.group_metadata
        self.topics_of = subscriptions.topics_of
        self.new_member_id = new_member_id

    # ------------------------------------------------------------ entry

    def handle(self, context, request, callback) -> None:
        error = validate(request, self.m.config.consumer_group_assignors)
        if error is not None:
            return callback(HeartbeatResult(error.error, error.message))
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            op = lambda: self._leave(request)  # noqa: E731
        else:
            op = lambda: self._heartbeat(context, request)  # noqa: E731
        self.m.submit(request.group_id, op, callback, lambda e, msg: HeartbeatResult(e, msg))

    def steady(self, group_id: str, member_id: str, member_epoch: int, client_id: str, client_host: str) -> int | None:
        """A heartbeat of steady shape (steady.is_steady_shape: the caller checked it) answered at once from
        its fields, as `handle` would answer it: its heartbeat interval (the answer is NONE, the member's id
        and epoch as sent, no assignment), or None: take `handle`. Only while no write of the group is in
        flight (else it would overtake the writes before it) and the shard is live."""
        m = self.m
        if not m.live or m.busy(group_id):
            return None
        if steady_group(self, group_id, member_id, member_epoch, client_id, client_host) is None:
            return None
        # the member's session timer, pushed back (the group's size is as last reported: no event)
        config = m.config
        if not m.timer.push(("consumer-session", group_id, member_id), config.consumer_group_session_timeout_ms):
            self.schedule_session_timeout(group_id, member_id)
        return config.consumer_group_heartbeat_interval_ms

    # ------------------------------------------------------------ join / heartbeat

    def _heartbeat(self, context, req):
        steady = steady_heartbeat(self, context, req)  # the common case, answered without the full path
        if steady is not None:
            return steady
        m, gid, epoch = self.m, req.group_id, req.member_epoch
        owned = _owned(req)
        records: list = []
        group, upgraded = migration.get_or_maybe_create_group(self.m, gid, epoch == 0, records)
        member_id = req.member_id or self.new_member_id()
        if len(group.members) >= m.config.consumer_group_max_size and member_id not in group.members:
            raise GroupError(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of "
                                                       f"{m.config.consumer_group_max_size} members.")
        replaced: str | None = None
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if epoch != 0:
                    raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
                member = ConsumerGroupMember(member_id)
                m.log.info("[GroupId %s] Member %s joins the consumer group using the consumer protocol.",
                           gid, member_id)
            else:
                self._check_epoch(member, epoch, owned)
        else:
            member, replaced = self._static_member(group, member_id, epoch, req.instance_id, owned, records)
        joined = member.member_id not in group.members and replaced is None

        regex = getattr(req, "subscribed_topic_regex", None)
        if (req.instance_id is None and req.rack_id is None and req.rebalance_timeout_ms == -1
                and req.server_assignor is None and req.subscribed_topic_names is None and regex is None
                and context.client_id == member.client_id and context.client_host == member.client_host
                and member.classic is None):
            updated = member  # a heartbeat that sends no field of the member (most do): no change to build
        else:
            updated = member.replace(
                instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
                rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms,
                server_assignor_name=req.server_assignor if req.server_assignor is not None
                else member.server_assignor_name,
                subscribed_topic_names=frozenset(req.subscribed_topic_names)
                if req.subscribed_topic_names is not None else member.subscribed_topic_names,
                subscribed_topic_regex=(regex or None) if regex is not None else member.subscribed_topic_regex,
                client_id=context.client_id, client_host=context.client_host, classic=None)
        reconciled, cause, refresh = self.update_member(group, member, updated, replaced, owned, records, joined,
                                                        MIGRATION if upgraded else None)

        full = epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                              and owned is not None)
        result = HeartbeatResult(E.NONE, None, reconciled.member_id, reconciled.member_epoch,
                                 m.config.consumer_group_heartbeat_interval_ms,
                                 reconciled.assigned_partitions
                                 if full or reconciled.assigned_partitions != member.assigned_partitions else None)

        def after() -> None:
            self.schedule_session_timeout(gid, reconciled.member_id)
            if reconciled != updated:  # a revocation starts (its deadline) or ends
                if reconciled.state == UNREVOKED_PARTITIONS:
                    self.schedule_rebalance_timeout(gid, reconciled)
                else:
                    self.m.timer.cancel(("consumer-rebalance", gid, reconciled.member_id))
            if replaced is not None:
                self.m.cancel_member_timers(gid, replaced)
            for other in group.members.values() if upgraded else ():  # the classic members' sessions run here
                if other.classic is not None:
                    self.schedule_session_timeout(gid, other.member_id, other.classic.session_timeout_ms)
            if cause is not None:
                self.m.events.rebalance(gid, cause)
            if refresh is not None:
                self.regex_refresh.schedule(gid, refresh, reconciled.member_id)
            g = self.m.groups.get(gid)
            self.m.events.group_members(gid, len(g.members) if g else 0)

        return records, result, after

    def update_member(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                      replaced: str | None, owned, records: list, joined: bool, forced_cause: str | None = None
                      ) -> tuple[ConsumerGroupMember, str | None, frozenset[str] | None]:
        """Steps 1-3 of Kafka's consumerGroupHeartbeat (and classicGroupJoinToConsumerGroup): persist the
        updated member, bump the group epoch (`forced_cause`: what the bump is then recorded as, e.g.
        "migration") if the group is new, the member's topic names changed, it took up a regex another
        member already has resolved, or the subscription metadata changed -- a regex subscribes to the
        topics of its recorded resolution only, so a new one bumps nothing until its resolution is written
        (regex_refresh.py) --, compute a new target if the group epoch is ahead of it, and move the member
        one reconciliation step. -> (the member, the bump's cause, the regexes to resolve in the
        background once this is durable, or None)."""
        m, gid = self.m, group.group_id
        cause = None
        if updated is not member and updated != member:
            records.append(r.member_subscription_record(gid, updated))
        regex_update, refresh = update_regexes(group, member, updated, m.clock.now_ms(), m.topics.version(),
                                               m.config.consumer_group_regex_refresh_interval_ms,
                                               self.regex_refresh.is_refreshing(gid))
        if (group.group_epoch == 0 or updated.subscribed_topic_names != member.subscribed_topic_names
                or regex_update == REGEX_UPDATED_AND_RESOLVED):
            cause = "member_joined" if joined else "subscription_changed"
        group_epoch = group.group_epoch
        exclude = {member.member_id} if replaced is None else {member.member_id, replaced}
        records += self.regex_tombstones(group, exclude, updated)
        metadata = self.subscription_metadata(group, exclude=exclude, new=updated)
        if metadata != group.subscription_metadata:
            records.append(r.subscription_metadata_record(gid, metadata))
            cause = cause or ("subscription_changed" if regex_update == REGEX_UPDATED else "metadata_changed")
        if cause is not None and forced_cause is not None:
            cause = forced_cause
        if cause is not None:
            group_epoch += 1
            reason = f"Member {updated.member_id} bumped the group epoch to {group_epoch} ({cause})."
            records.append(r.group_epoch_record(gid, group_epoch, cause, reason, updated.member_id))
            m.log.info("[GroupId %s] Bumped group epoch to %d (%s).", gid, group_epoch, cause)

        if group_epoch > group.assignment_epoch:
            name = group.preferred_server_assignor(member, updated, m.config.consumer_group_assignors[0])
            targets, target_records = build_target_assignment(group, group_epoch, ASSIGNORS[name], updated, metadata,
                                                              lambda x: self.topics_of(group, x), removed=replaced)
            records += target_records
            target_epoch, target = group_epoch, targets.get(updated.member_id, {})
            m.log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
                       gid, group_epoch, name)
        else:
            target_epoch, target = group.assignment_epoch, group.target_of(updated.member_id, updated.instance_id)

        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            try:
                reconciled = reconcile(updated, target_epoch, target, group.current_partition_epoch, owned)
            except FencedMemberEpoch as e:
                raise GroupError(E.FENCED_MEMBER_EPOCH, str(e)) from None
            if reconciled != updated:
                records.append(r.current_assignment_record(gid, reconciled))
        return reconciled, cause, refresh

    def _check_epoch(self, member: ConsumerGroupMember, epoch: int, owned) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member may be one epoch behind only if its
        answer was lost (it owns no more than its assignment)."""
        if epoch > member.member_epoch:
            raise GroupError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch ({epoch})"
                             f" than the one known by the group coordinator ({member.member_epoch}). "
                             "The member must abandon all its partitions and rejoin.")
        if epoch < member.member_epoch and (epoch != member.previous_member_epoch
                                           or not is_subset(owned, member.assigned_partitions)):
            raise GroupError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch ({epoch})"
                             f" than the one known by the group coordinator ({member.member_epoch}). "
                             "The member must abandon all its partitions and rejoin.")

    def _static_member(self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str, owned,
                       records: list) -> tuple[ConsumerGroupMember, str | None]:
        """Kafka's getOrMaybeSubscribeStaticConsumerGroupMember: (member, id of the member it replaces)."""
        existing = group.static_member(instance_id)
        if epoch == 0:
            if existing is None:
                return group.members.get(member_id) or ConsumerGroupMember(member_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and existing.classic is None:
                raise GroupError(E.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                 f"{instance_id} cannot join the group because the instance id is owned by "
                                 f"{existing.member_id} member.")
            new = existing.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
            gid = group.group_id
            records += r.member_removal(gid, existing.member_id)
            records += [r.member_subscription_record(gid, new),
                        r.target_member_record(gid, member_id, group.target_assignment.get(existing.member_id, {})),
                        r.current_assignment_record(gid, new)]
            self.m.log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group. Created a "
                            "new member %s to replace the existing member %s.", gid, instance_id, member_id,
                            existing.member_id)
            return new, existing.member_id
        if existing is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                             f"was fenced by member {existing.member_id}.")
        self._check_epoch(existing, epoch, owned)
        return existing, None

    # ------------------------------------------------------------ leave and fence

    def _leave(self, req):
        group = self.m.groups.get(req.group_id)
        if group is None:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        response = HeartbeatResult(E.NONE, None, req.member_id, req.member_epoch)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                                      f"{req.group_id}.")
            self.m.log.info("[GroupId %s] Member %s left the consumer group.", req.group_id, req.member_id)
            return self.fence(group, member, "member_left", response)
        member = group.static_member(req.instance_id)
        if member is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                             f"{req.instance_id} was fenced by member {member.member_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            self.m.log.info("[GroupId %s] Static member %s with instance id %s temporarily left the consumer group.",
                            req.group_id, member.member_id, req.instance_id)
            leaving = member.replace(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={})
            return ([r.current_assignment_record(req.group_id, leaving)],
                    HeartbeatResult(E.NONE, None, member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH), None)
        return self.fence(group, member, "member_left", response)

    def fence(self, group: ConsumerGroup, member: ConsumerGroupMember, cause: str, response=None):
        """Kafka's consumerGroupFenceMember: the member's records go, the group epoch is bumped (the next
        heartbeat of another member computes the new target)."""
        gid = group.group_id
        if migration.validate_online_downgrade(self.m, group, member.member_id):
            return (migration.downgrade_records(self.m, group, member.member_id), response,
                    lambda: migration.after_downgrade(self.m, group))
        records = r.member_removal(gid, member.member_id)
        records += self.regex_tombstones(group, exclude={member.member_id}, new=None)
        metadata = self.subscription_metadata(group, exclude={member.member_id}, new=None)
        if metadata != group.subscription_metadata:
            records.append(r.subscription_metadata_record(gid, metadata))
        records.append(r.group_epoch_record(gid, group.group_epoch + 1, cause,
                                            f"Member {member.member_id} was removed from the group ({cause}).",
                                            member.member_id))

        def after() -> None:
            self.m.cancel_member_timers(gid, member.member_id)
            self.m.events.rebalance(gid, cause)
            g = self.m.groups.get(gid)
            self.m.events.group_members(gid, len(g.members) if g else 0)

        return records, response, after

    def _fence_operation(self, group_id: str, member_id: str, cause: str, epoch: int | None = None):
        group = self.m.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return [], None, None  # gone, or moved on since the timer was set
        why = _FENCE_REASONS.get(cause, f"it failed to transition from epoch {epoch} within the rebalance timeout")
        self.m.log.info("[GroupId %s] Member %s fenced from the group because %s.", group_id, member_id, why)
        return self.fence(group, member, cause)

    # ------------------------------------------------------------ timers

    def schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """`timeout_ms`: a classic member's own session timeout; else group.consumer.session.timeout.ms."""
        self.m.timer.schedule(("consumer-session", group_id, member_id),
                              self.m.config.consumer_group_session_timeout_ms if timeout_ms is None else timeout_ms,
                              lambda: self.expire(group_id, member_id, "session_timeout", None))

    def schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        epoch = member.member_epoch
        self.m.timer.schedule(("consumer-rebalance", group_id, member.member_id), max(member.rebalance_timeout_ms, 0),
                              lambda: self.expire(group_id, member.member_id, "rebalance_timeout", epoch))

    def expire(self, group_id: str, member_id: str, cause: str, epoch: int | None) -> None:
        """A timer fired (session, rebalance, or a classic member's join / sync timeout): fence the member."""
        self.m.submit(group_id, lambda: self._fence_operation(group_id, member_id, cause, epoch),
                      lambda _result: None, lambda _e, _msg: None)

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        """The session and rebalance timeouts; a classic member's join and sync are ClassicMembers' (both:
        ConsumerContext.cancel_member_timers)."""
        self.m.timer.cancel(("consumer-session", group_id, member_id))
        self.m.timer.cancel(("consumer-rebalance", group_id, member_id))
