"""SyncGroup (v0-v5), after the seeds: handle_sync_group -> do_sync_group -> store_group ->
set_and_propagate_assignment (then Stable) / reset_and_propagate_assignment_error (then rebalance).

    v3   group.instance.id (KIP-345): fenced old incarnations get FENCED_INSTANCE_ID
    v5   protocol type and name in request and response (KIP-559), checked against the group's
"""
from __future__ import annotations

from kcoord.coordinator.classic_context import ClassicContext
from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.parked import SyncCallback
from kcoord.coordinator.rebalance import Rebalancer
from kcoord.coordinator.records import rebalance_headers
from kcoord.coordinator.results import SyncGroupResult
from kcoord.protocol.errors import ErrorCode

S = GroupState


class ClassicSync:
    def __init__(self, context: ClassicContext, rebalance: Rebalancer) -> None:
        self.context = context
        self.rebalance = rebalance
        self.parked = context.parked
        self.log = context.log

    def handle_sync_group(self, request, version: int, callback: SyncCallback) -> None:
        """`request`: a SyncGroupRequest of `version` (its group id already checked by the front door)."""
        group = self.context.get_group(request.group_id)
        if group is None:
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        self.do_sync_group(group, request.generation_id, request.member_id,
                           request.protocol_type if version >= 5 else None,
                           request.protocol_name if version >= 5 else None,
                           request.group_instance_id if version >= 3 else None,
                           {a.member_id: a.assignment for a in request.assignments}, callback)

    def do_sync_group(self, group: GroupMetadata, generation_id: int, member_id: str, protocol_type: str | None,
                      protocol_name: str | None, group_instance_id: str | None, assignments: dict[str, bytes],
                      callback: SyncCallback) -> None:
        if group.is_(S.DEAD):
            callback(SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif group.is_static_member_fenced(group_instance_id, member_id):
            callback(SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        elif not group.has(member_id):
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif generation_id != group.generation_id:
            callback(SyncGroupResult(ErrorCode.ILLEGAL_GENERATION))
        elif protocol_type is not None and protocol_type != group.protocol_type:
            callback(SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        elif protocol_name is not None and protocol_name != group.protocol_name:
            callback(SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        else:
            match group.state:
                case S.EMPTY:
                    callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
                case S.PREPARING_REBALANCE:
                    callback(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
                case S.COMPLETING_REBALANCE:
                    self._sync_completing_rebalance(group, generation_id, member_id, assignments, callback)
                case S.STABLE:
                    # A late follower: the assignment is already stored.
                    self.rebalance.remove_pending_sync_member(group, member_id)
                    member = group.get(member_id)
                    callback(SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                                             member.assignment))
                    self.rebalance.complete_and_schedule_next_heartbeat_expiration(group, member)

    def _sync_completing_rebalance(self, group: GroupMetadata, generation_id: int, member_id: str,
                                   assignments: dict[str, bytes], callback: SyncCallback) -> None:
        # Everyone waits here until the leader's assignment is durable.
        self.parked.park_sync(group, group.get(member_id), callback)
        self.rebalance.remove_pending_sync_member(group, member_id)
        if not group.is_leader(member_id):
            return
        static = sum(1 for m in group.all_member_metadata() if m.is_static_member)
        self.log.info("Assignment received from leader %s for group %s for generation %d. The group has %d members, "
                      "%d of which are static.", member_id, group.group_id, group.generation_id, group.size, static)
        # Members the leader left out get an empty assignment; ids not in the group are ignored.
        missing = [m for m in group.all_members() if m not in assignments]
        assignment = {m: bytes(assignments.get(m, b"")) for m in group.all_members()}
        if missing:
            self.log.warning("Setting empty assignments for members %s of %s for generation %d", missing,
                             group.group_id, group.generation_id)
        headers = rebalance_headers(group, self.context.now_ms(), sync_done=True)

        def on_stored(error: ErrorCode) -> None:
            if not (self.rebalance.is_current(group) and group.is_(S.COMPLETING_REBALANCE)
                    and generation_id == group.generation_id):
                return  # a newer rebalance has taken over; its members get its own answers
            if error != ErrorCode.NONE:
                self.rebalance.reset_and_propagate_assignment_error(group, error)
                self.rebalance.maybe_prepare_rebalance(
                    group, f"Error {error.name} when storing group assignment during SyncGroup (member: {member_id})",
                    "store_failure", member_id)
            else:
                self.rebalance.set_and_propagate_assignment(group, assignment)
                group.transition_to(S.STABLE, self.context.now_ms())
                self.log.info("Group %s transitioned to Stable with generation %d and %d members", group.group_id,
                              group.generation_id, group.size)

        self.rebalance.store_group(group, assignment, on_stored, headers)
