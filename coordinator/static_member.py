"""A static member (KIP-345) rejoining with an unknown member id: update_static_member_and_rebalance,
after the seeds. Its old incarnation is fenced, the new id takes its place; in a Stable group with
unchanged protocols the group is stored again instead of rebalancing (KIP-814 for the leader)."""
from __future__ import annotations

from kcoord.coordinator.classic_context import ClassicContext
from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.join_request import UNKNOWN_MEMBER_ID, JoinRequest
from kcoord.coordinator.parked import JoinCallback
from kcoord.coordinator.rebalance import Rebalancer
from kcoord.coordinator.results import JoinGroupResult, SyncGroupResult
from kcoord.protocol.errors import ErrorCode

S = GroupState


class StaticMembership:
    def __init__(self, context: ClassicContext, rebalance: Rebalancer) -> None:
        self.rebalance = rebalance
        self.parked = context.parked
        self.log = context.log

    def update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                           join: JoinRequest, callback: JoinCallback) -> None:
        group_instance_id = join.group_instance_id
        current_leader = group.leader_id or ""
        # Fence the old incarnation right away if it has a request parked.
        old = group.get(old_member_id)
        self.parked.complete_join(group, old, JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        self.parked.complete_sync(group, old, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        # The old id's heartbeat timer is left to expire harmlessly; the new id gets its own.
        self.rebalance.remove_heartbeat_for_leaving_member(group, old_member_id)
        self.rebalance.complete_and_schedule_next_heartbeat_expiration(group, member)
        old_protocols = member.supported_protocols
        old_rebalance_timeout, old_session_timeout = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, join.protocols, join.rebalance_timeout_ms, join.session_timeout_ms)
        self.parked.park_join(group, member, callback)
        why = join.why
        match group.state:
            case S.STABLE:
                if group.protocol_name == group.select_protocol():
                    self.log.info("Static member %s of group %s rejoined with unchanged protocol; no rebalance",
                                  group_instance_id, group.group_id)
                    assignment = {m.member_id: m.assignment for m in group.all_member_metadata()}

                    def on_stored(error: ErrorCode) -> None:
                        if error != ErrorCode.NONE:
                            self.log.warning("Failed to persist metadata for group %s: %s", group.group_id,
                                             error.name)
                            # Revert: the old member id stays the one the log knows.
                            self.parked.park_join(group, member, None)
                            group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout)
                            restored = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                            self.rebalance.remove_heartbeat_for_leaving_member(group, new_member_id)
                            self.rebalance.complete_and_schedule_next_heartbeat_expiration(group, restored)
                            callback(JoinGroupResult(error, UNKNOWN_MEMBER_ID, group.generation_id,
                                                     group.protocol_type, group.protocol_name, current_leader))
                        elif join.supports_skip_assignment:
                            # KIP-814: the leader learns it leads but must not run the assignor again.
                            is_leader = group.is_leader(new_member_id)
                            self.parked.complete_join(group, member, JoinGroupResult(
                                ErrorCode.NONE, new_member_id, group.generation_id, group.protocol_type,
                                group.protocol_name, group.leader_id or "", is_leader,
                                group.current_member_metadata() if is_leader else []))
                        else:
                            # Before v9, answer with the old leader id so the rejoined leader acts as a
                            # follower and does not compute an assignment a Stable group would ignore.
                            self.parked.complete_join(group, member, JoinGroupResult(
                                ErrorCode.NONE, new_member_id, group.generation_id, group.protocol_type,
                                group.protocol_name, current_leader, False, []))

                    self.rebalance.store_group(group, assignment, on_stored)
                else:
                    self.rebalance.maybe_prepare_rebalance(
                        group, f"Group's selectedProtocol will change because static member {new_member_id} with "
                               f"instance id {group_instance_id} joined with change of protocol; client reason: {why}",
                        "static_member_update", new_member_id)
            case S.COMPLETING_REBALANCE:
                # The leader may already have assigned to the old id, so the new id needs a rebalance.
                self.rebalance.prepare_rebalance(
                    group, f"Updating metadata for static member {new_member_id} with instance id "
                           f"{group_instance_id}; client reason: {why}", "static_member_update", new_member_id)
            case S.PREPARING_REBALANCE:
                pass  # parked with the others
            case S.EMPTY | S.DEAD:
                raise AssertionError(f"static member {group_instance_id} known to group {group.group_id} "
                                     f"in state {group.state}")
