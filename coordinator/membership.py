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


class MembershipMixin(RebalanceMixin):

    def handle_heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                         callback: Callable[[ErrorCode], None]) -> None:
        error = self.validate_group_status(group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # Kafka answers blindly while loading: the loaded group gives every member a fresh session.
            callback(ErrorCode.NONE)
            return
        if error is not None:
            callback(error)
            return
        callback(self._heartbeat(group_id, member_id, group_instance_id, generation_id))

    def _heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                   generation_id: int) -> ErrorCode:
        group = self.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.get(member_id)
        match group.state:
            case S.EMPTY:
                return ErrorCode.UNKNOWN_MEMBER_ID
            case S.PREPARING_REBALANCE:
                # Keep it alive, but tell it to rejoin.
                self.complete_and_schedule_next_heartbeat_expiration(group, member)
                return ErrorCode.REBALANCE_IN_PROGRESS
            case _:  # CompletingRebalance (it may heartbeat right after its JoinGroup response), Stable
                self.complete_and_schedule_next_heartbeat_expiration(group, member)
                return ErrorCode.NONE

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
