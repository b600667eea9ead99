"""Starting and completing a classic group's rebalance, after the seeds: maybe_prepare_rebalance /
prepare_rebalance, the join phase's completion (on_complete_join), pending-sync expiry, session expiry
and member removal, store_group and the assignment's propagation."""
from __future__ import annotations

from collections.abc import Callable

from kcoord.coordinator.classic_context import ClassicContext
from kcoord.coordinator.core import map_write_error
from kcoord.coordinator.group_metadata import GroupMetadata, RebalanceInfo
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.member_metadata import MemberMetadata
from kcoord.coordinator.purgatory import DelayedJoin, InitialDelayedJoin
from kcoord.coordinator.records import REBALANCE_CAUSES, group_metadata_record, rebalance_headers
from kcoord.coordinator.results import JoinGroupResult, SyncGroupResult
from kcoord.protocol.errors import ErrorCode

S = GroupState


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


# the causes a member coming back to a group's new coordinator gives a rebalance (its JoinGroup or SyncGroup
# was answered NOT_COORDINATOR by the old one); a member that died with it still expires as "session_timeout"
MOVE_CAUSES = frozenset({"member_joined", "leader_rejoined", "sync_timeout", "join_timeout",
                         "static_member_update", "other"})


class Rebalancer:
    """The rebalance steps of one shard's classic groups; state lives in the group manager (`context`).
    It is the purgatory's JoinPhase: a delayed join calls back try_complete_join / on_complete_join."""

    def __init__(self, context: ClassicContext) -> None:
        self.context = context
        self.config = context.config
        self.log = context.log
        self.timer = context.timer
        self.parked = context.parked
        self.join_purgatory = context.join_purgatory
        self.groups = context.groups  # the manager's dict itself (never rebound)

    # ------------------------------------------------------------ starting a rebalance

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str, cause: str = "other",
                                member_id: str = "") -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason, cause, member_id)

    def prepare_rebalance(self, group: GroupMetadata, reason: str, cause: str = "other",
                          member_id: str = "") -> None:
        if cause not in REBALANCE_CAUSES:  # the analytics contract has a closed set of categories
            cause = "other"
        # Members waiting for the old generation's assignment must rejoin instead.
        if group.is_(S.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.remove_sync_expiration(group)
        delay = self.config.group_initial_rebalance_delay_ms
        now = self.context.now_ms()
        if group.moved_until_ms is not None:  # the first rebalance after a coordinator move
            if now <= group.moved_until_ms and cause in MOVE_CAUSES:
                cause = "coordinator_moved"
            group.moved_until_ms = None
        if group.is_(S.EMPTY):
            if cause == "member_joined":
                cause = "initial_join"
            group.new_member_added = False  # counts arrivals after this point only
            op: DelayedJoin = InitialDelayedJoin(self, group, delay, delay,
                                                 max(group.rebalance_timeout_ms() - delay, 0))
        else:
            op = DelayedJoin(self, group, group.rebalance_timeout_ms())
        group.transition_to(S.PREPARING_REBALANCE, now)
        group.rebalance = RebalanceInfo(cause, reason, member_id, now)
        self.log.info("Preparing to rebalance group %s in state %s with old generation %d (%s) (reason: %s)",
                      group.group_id, group.state, group.generation_id, self.context.topic_partition_name,
                      reason)
        self.context.events.rebalance(group.group_id, cause)
        self.join_purgatory.try_complete_else_watch(op, group.group_id)

    # ------------------------------------------------------------ completing the join phase

    def is_current(self, group: GroupMetadata) -> bool:
        return self.context.group_if_current(group)

    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool:
        if group.has_all_members_joined():
            return force_complete()
        return False

    def on_expire_join(self, group: GroupMetadata) -> None:
        self.log.debug("Join phase of group %s reached its rebalance timeout", group.group_id)

    def on_complete_join(self, group: GroupMetadata) -> None:
        # Dynamic members that did not rejoin are gone; static ones stay until their session expires.
        not_rejoined = [m for m in group.not_yet_rejoined_members() if not m.is_static_member]
        if not_rejoined:
            self.log.info("Group %s removed dynamic members who haven't joined: %s", group.group_id,
                          [m.member_id for m in not_rejoined])
            for member in not_rejoined:
                self.remove_heartbeat_for_leaving_member(group, member.member_id)
                group.remove(member.member_id)
        if group.is_(S.DEAD):
            self.log.info("Group %s is dead, skipping rebalance stage", group.group_id)
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for session expiry to clear them out.
            self.log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            self.join_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, group.rebalance_timeout_ms()), group.group_id)
            return
        now = self.context.now_ms()
        if group.rebalance is not None:
            group.rebalance.join_done_ms = now
        group.init_next_generation(now)
        if group.is_(S.EMPTY):
            self.log.info("Group %s with generation %d is now empty (%s)", group.group_id, group.generation_id,
                          self.context.topic_partition_name)
            self.context.events.group_members(group.group_id, 0)
            headers = rebalance_headers(group, now, sync_done=False)
            self.store_group(group, {}, lambda error: self._log_store_error(group, error), headers)
            return
        self.log.info("Stabilized group %s generation %d (%s) with %d members", group.group_id,
                      group.generation_id, self.context.topic_partition_name, group.size)
        self.context.events.group_members(group.group_id, group.size)
        for member in group.all_member_metadata():
            result = JoinGroupResult(
                ErrorCode.NONE, member.member_id, group.generation_id, group.protocol_type, group.protocol_name,
                group.leader_id or "", False,
                group.current_member_metadata() if group.is_leader(member.member_id) else [])
            self.parked.complete_join(group, member, result)
            self.complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.schedule_pending_sync(group)

    def _log_store_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        if error != ErrorCode.NONE:
            self.log.warning("Failed to write empty metadata for group %s: %s", group.group_id, error.name)

    # ------------------------------------------------------------ pending sync

    def schedule_pending_sync(self, group: GroupMetadata) -> None:
        generation = group.generation_id
        self.timer.schedule(sync_key(group.group_id), group.rebalance_timeout_ms(),
                            lambda: self.on_expire_pending_sync(group, generation))

    def remove_sync_expiration(self, group: GroupMetadata) -> None:
        self.timer.cancel(sync_key(group.group_id))

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.has_received_sync_from_all_members():
            self.remove_sync_expiration(group)

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if not self.is_current(group) or generation_id != group.generation_id:
            return
        if group.state not in (S.COMPLETING_REBALANCE, S.STABLE) or group.has_received_sync_from_all_members():
            return
        pending = sorted(group.pending_sync_members)
        for member_id in pending:
            group.remove(member_id)
            self.remove_heartbeat_for_leaving_member(group, member_id)
        self.log.info("Group %s removed members who haven't sent their sync requests: %s", group.group_id, pending)
        self.prepare_rebalance(group, f"Removing {pending} on pending sync request expiration", "sync_timeout",
                               pending[0] if len(pending) == 1 else "")

    # ------------------------------------------------------------ assignment propagation

    def set_and_propagate_assignment(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        """The stored assignment reaches every member (the replay of its record set it on the members
        the record names; members it does not name get an empty one)."""
        assert group.is_(S.COMPLETING_REBALANCE)
        for member in group.all_member_metadata():
            member.assignment = assignment.get(member.member_id, b"")
        self.propagate_assignment(group, ErrorCode.NONE)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        assert group.is_(S.COMPLETING_REBALANCE)
        for member in group.all_member_metadata():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.all_member_metadata():
            if ok and not member.assignment:
                self.log.warning("Sending empty assignment to member %s of %s for generation %d with no errors",
                                 member.member_id, group.group_id, group.generation_id)
            result = SyncGroupResult(error, group.protocol_type if ok else None,
                                     group.protocol_name if ok else None, member.assignment)
            if self.parked.complete_sync(group, member, result):
                # A session may have "expired" while the member was parked; start it afresh.
                self.complete_and_schedule_next_heartbeat_expiration(group, member)

    # ------------------------------------------------------------ heartbeats and member removal

    def complete_and_schedule_next_heartbeat_expiration(self, group: GroupMetadata, member: MemberMetadata,
                                                        timeout_ms: int | None = None) -> None:
        # Replacing the keyed timer completes the previous expectation; the next one starts unmet.
        member.heartbeat_satisfied = False
        expiry = member.heartbeat_expiry
        if expiry is None or expiry[0] != member.member_id:  # first time, or a static member's new id
            expiry = member.heartbeat_expiry = self._heartbeat_expiry(group, member.member_id)
        self.timer.schedule(expiry[1], member.session_timeout_ms if timeout_ms is None else timeout_ms, expiry[2])

    def _heartbeat_expiry(self, group: GroupMetadata, member_id: str) -> tuple[str, tuple, Callable[[], None]]:
        # Made once per member: every heartbeat reschedules the same key and callback.
        return (member_id, heartbeat_key(group.group_id, member_id),
                lambda: self.on_expire_heartbeat(group, member_id, is_pending=False))

    def add_pending_member_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        self.timer.schedule(heartbeat_key(group.group_id, member_id), timeout_ms,
                            lambda: self.on_expire_heartbeat(group, member_id, is_pending=True))

    def remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        self.timer.cancel(heartbeat_key(group.group_id, member_id))

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if not self.is_current(group):
            return
        if is_pending:
            if group.is_pending_member(member_id):
                self.log.info("Pending member %s in group %s has been removed after session timeout expiration",
                              member_id, group.group_id)
                self.remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat:
            return
        cause = "join_timeout" if member.is_new else "session_timeout"
        self.log.info("Member %s in group %s has failed, removing it from the group", member_id, group.group_id)
        self.remove_member_and_update_group(
            group, member, f"removing member {member_id} on heartbeat expiration", cause)

    def remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str,
                                       cause: str) -> None:
        # A new member may be parked in JoinGroup; answer it so that the client retries if still alive.
        self.parked.complete_join(group, member, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, ""))
        group.remove(member.member_id)
        self.remove_heartbeat_for_leaving_member(group, member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason, cause, member.member_id)
        elif group.is_(S.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(group.group_id)

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        self.remove_heartbeat_for_leaving_member(group, member_id)
        if group.is_(S.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(group.group_id)

    # ------------------------------------------------------------ persistence of the group

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes],
                    callback: Callable[[ErrorCode], None], headers: list | None = None) -> None:
        """Write the GroupMetadata record; `callback` gets the client-facing error once it is durable and
        replayed (the replay records it as the group's stored value)."""
        self.context.write([group_metadata_record(group, assignment, headers)],
                           lambda error: callback(map_write_error(error)))
