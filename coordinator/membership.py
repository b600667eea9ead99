"""Heartbeat (v0-v4) and LeaveGroup (v0-v5).

Heartbeat:  v3 group.instance.id (KIP-345).
LeaveGroup: v3 batch of members, each by member id and/or group.instance.id (KIP-345);
            v5 a reason per member (KIP-800), only logged. v0-v2 send one member id; the broker
            passes it as a one-element list and folds the per-member results back.
"""
from __future__ import annotations

from collections.abc import Callable

from coordinator.group_state import GroupState
from coordinator.rebalance import RebalanceMixin
from coordinator.results import LeaveGroupResult, LeaveMemberResult
from protocol.errors import ErrorCode

S = GroupState
# Bound once for heartbeat(), which runs for every member's every heartbeat: reading a member off
# an Enum class costs several plain lookups.
_DEAD, _EMPTY, _PREPARING_REBALANCE = S.DEAD, S.EMPTY, S.PREPARING_REBALANCE
_NONE, _REBALANCE_IN_PROGRESS = ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS


class MembershipMixin(RebalanceMixin):

    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                         callback: Callable[[ErrorCode], None]) -> None:
        callback(self.heartbeat(group_id, member_id, group_instance_id, generation_id))

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        """handle_heartbeat without the callback: a heartbeat is always answered at once, and the
        broker's Heartbeat fast path calls this for every member's every heartbeat."""
        error = self.validate_group_status(group_id)
        if error is not None:
            # Kafka answers blindly while loading: the loaded group gives every member a fresh session.
            return ErrorCode.NONE if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else error
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
        self.complete_and_schedule_next_heartbeat_expiration(group, member)
        # PreparingRebalance: kept alive, but told to rejoin. CompletingRebalance (it may heartbeat
        # right after its JoinGroup response) and Stable: all is well.
        return _REBALANCE_IN_PROGRESS if state is _PREPARING_REBALANCE else _NONE

    def handle_leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]],
                           callback: Callable[[LeaveGroupResult], None]) -> None:
        """`members`: (member_id, group_instance_id, reason); member_id "" + instance id = admin removal."""
        error = self.validate_group_status(group_id)
        if error is not None:
            callback(LeaveGroupResult(error))
            return
        group = self.get_group(group_id)
        if group is None:
            callback(LeaveGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if group.is_(S.DEAD):
            callback(LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
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
                self.remove_pending_member_and_update_group(group, member_id)
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
        callback(LeaveGroupResult(ErrorCode.NONE, results))

    def _remove_current_member_from_group(self, group, member_id: str, reason: str) -> None:
        member = group.get(member_id)
        self.log.info("Member %s has left group %s through explicit `LeaveGroup`; client reason: %s", member,
                      group.group_id, reason,
                      extra={"group_id": group.group_id, "event": "member_left", "member_id": member_id})
        self.remove_member_and_update_group(group, member, f"Removing member {member_id} on LeaveGroup; "
                                                           f"client reason: {reason}", "member_left")
