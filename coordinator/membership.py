"""Heartbeat (v0-v4) and LeaveGroup (v0-v5) of classic groups: answered at once, never parked.

Heartbeat:  v3 group.instance.id (KIP-345).
LeaveGroup: v3 batch of members, each by member id and/or group.instance.id (KIP-345);
            v5 a reason per member (KIP-800), only logged. v0-v2 send one member id: it is served as
            a one-member batch (the broker folds the per-member result back).
"""
from __future__ import annotations

from kcoord.coordinator.classic_context import ClassicContext
from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.rebalance import Rebalancer
from kcoord.coordinator.results import LeaveGroupResult, LeaveMemberResult
from kcoord.protocol.errors import ErrorCode

S = GroupState
# Bound once for heartbeat(), which runs for every member's every heartbeat: reading a member off
# an Enum class costs several plain lookups.
_DEAD, _EMPTY, _PREPARING_REBALANCE = S.DEAD, S.EMPTY, S.PREPARING_REBALANCE
_NONE, _REBALANCE_IN_PROGRESS = ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS


def leave_members(request, version: int) -> list[tuple[str, str | None, str | None]]:
    """A LeaveGroup's (member_id, group_instance_id, reason); v0-v2 name one member by id."""
    if version < 3:
        return [(request.member_id, None, None)]
    return [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None) for m in request.members]


class ClassicMembership:
    def __init__(self, context: ClassicContext, rebalance: Rebalancer) -> None:
        self.context = context
        self.groups = context.groups  # the manager's dict itself (never rebound)
        self.rebalance = rebalance
        self.log = context.log

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        """A heartbeat's answer, at once (the front door checked the group id and the shard)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        state = group.state
        if state is _DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group_instance_id is not None and group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if state is _EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.rebalance.complete_and_schedule_next_heartbeat_expiration(group, member)
        # PreparingRebalance: kept alive, but told to rejoin. CompletingRebalance (it may heartbeat
        # right after its JoinGroup response) and Stable: all is well.
        return _REBALANCE_IN_PROGRESS if state is _PREPARING_REBALANCE else _NONE

    def handle_leave_group(self, group_id: str,
                           members: list[tuple[str, str | None, str | None]]) -> LeaveGroupResult:
        """`members`: (member_id, group_instance_id, reason); member_id "" + instance id = admin removal."""
        group = self.context.get_group(group_id)
        if group is None:
            return LeaveGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(S.DEAD):
            return LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        results = []
        for member_id, group_instance_id, reason in members:
            why = "not provided" if reason is None else reason
            if member_id == "":
                current = group.current_static_member_id(group_instance_id)
                if current is not None and group.has(current):
                    self._remove_current_member_from_group(group, current, why)
                    err = ErrorCode.NONE
                else:
                    err = ErrorCode.UNKNOWN_MEMBER_ID
            elif group.is_pending_member(member_id):
                self.rebalance.remove_pending_member_and_update_group(group, member_id)
                self.log.info("Pending member %s has left group %s through explicit `LeaveGroup` request; "
                              "client reason: %s", member_id, group_id, why)
                err = ErrorCode.NONE
            elif group.is_static_member_fenced(group_instance_id, member_id):
                err = ErrorCode.FENCED_INSTANCE_ID
            elif not group.has(member_id):
                err = ErrorCode.UNKNOWN_MEMBER_ID
            else:
                self._remove_current_member_from_group(group, member_id, why)
                err = ErrorCode.NONE
            results.append(LeaveMemberResult(member_id, group_instance_id, err))
        return LeaveGroupResult(ErrorCode.NONE, results)

    def _remove_current_member_from_group(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        self.log.info("Member %s has left group %s through explicit `LeaveGroup`; client reason: %s", member,
                      group.group_id, reason)
        self.rebalance.remove_member_and_update_group(group, member, f"Removing member {member_id} on LeaveGroup; "
                                                                     f"client reason: {reason}", "member_left")
