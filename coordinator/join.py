"""JoinGroup (v0-v9), after the seeds: handle_join_group -> do_unknown_join_group / do_join_group ->
add_member_and_rebalance / update_member_and_rebalance -> maybe_prepare_rebalance.

The seeds' first checks (validate_group_status: group id, active, loading, owned; the session timeout's
bounds) are the front door's (kcoord.coordinator.service), as in Kafka 4's GroupCoordinatorService.

    v0   no rebalance timeout: the session timeout doubles as the rebalance timeout
    v4   MEMBER_ID_REQUIRED for dynamic members joining with an empty member id (KIP-394)
    v5   group.instance.id: static membership (KIP-345)
    v7   protocol type in the response (KIP-559; the broker decides what to encode)
    v8   reason, logged (KIP-800)
    v9   skip_assignment for a static leader rejoining a Stable group (KIP-814)
"""
from __future__ import annotations

from kcoord.coordinator.classic_context import ClassicContext
from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.join_request import UNKNOWN_MEMBER_ID, JoinRequest
from kcoord.coordinator.member_metadata import MemberMetadata
from kcoord.coordinator.parked import JoinCallback
from kcoord.coordinator.rebalance import Rebalancer
from kcoord.coordinator.results import JoinGroupResult
from kcoord.coordinator.static_member import StaticMembership
from kcoord.protocol.errors import ErrorCode

S = GroupState


class ClassicJoin:
    """JoinGroup for one shard's classic groups."""

    def __init__(self, context: ClassicContext, rebalance: Rebalancer, static_members: StaticMembership) -> None:
        self.context = context
        self.rebalance = rebalance
        self.static_members = static_members
        self.parked = context.parked
        self.config = context.config
        self.log = context.log

    def handle_join_group(self, join: JoinRequest, callback: JoinCallback) -> None:
        is_unknown_member = join.member_id == UNKNOWN_MEMBER_ID
        group = self.context.get_or_maybe_create_group(join.group_id, is_unknown_member)
        if group is None:
            callback(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, join.member_id))
            return
        if not self.accept_joining_member(group, join.member_id):
            self.log.info("Rejecting member %s of group %s: group.max.size %d reached",
                          join.member_id or join.client_id, join.group_id, self.config.group_max_size)
            group.remove(join.member_id)
            # Only forget the instance id if it named the rejected member; a full group must not
            # lose the mapping of a static member that is still in it.
            if group.current_static_member_id(join.group_instance_id) == join.member_id:
                group.remove_static_member(join.group_instance_id)
            self.rebalance.remove_heartbeat_for_leaving_member(group, join.member_id)
            callback(JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
        elif is_unknown_member:
            self.do_unknown_join_group(group, join, callback)
        else:
            self.do_join_group(group, join, callback)
        # Every join may be the last one the parked rebalance was waiting for.
        if group.is_(S.PREPARING_REBALANCE):
            self.context.join_purgatory.check_and_complete(join.group_id)

    def accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """group.max.size (KIP-389), counted the way each state allows."""
        max_size = self.config.group_max_size
        match group.state:
            case S.EMPTY | S.DEAD:
                return True
            case S.PREPARING_REBALANCE:
                return (group.has(member_id) and group.get(member_id).is_awaiting_join) or \
                    group.num_members_awaiting_join < max_size
            case _:  # CompletingRebalance / Stable: members who did not rejoin are already gone
                return group.has(member_id) or group.size < max_size

    def do_unknown_join_group(self, group: GroupMetadata, join: JoinRequest, callback: JoinCallback) -> None:
        if group.is_(S.DEAD):
            # The group was unloaded or deleted meanwhile: send the client to find its coordinator.
            callback(JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(join.protocol_type, {name for name, _ in join.protocols}):
            callback(JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
            return
        new_member_id = group.generate_member_id(join.client_id, join.group_instance_id)
        if group.has_static_member(join.group_instance_id):
            old_member_id = group.current_static_member_id(join.group_instance_id)
            self.log.info("Static member %s of group %s with unknown member id rejoins, assigning new member id "
                          "%s (old %s); client reason: %s", join.group_instance_id, group.group_id, new_member_id,
                          old_member_id, join.why)
            self.static_members.update_static_member_and_rebalance(group, old_member_id, new_member_id, join,
                                                                   callback)
        elif join.require_known_member_id:
            # KIP-394: park the id as pending and make the client come back with it.
            group.add_pending_member(new_member_id)
            self.rebalance.add_pending_member_expiration(group, new_member_id, join.session_timeout_ms)
            self.log.debug("Dynamic member with unknown member id joins group %s in %s state; created member id "
                           "%s and requested a rejoin with it", group.group_id, group.state, new_member_id)
            callback(JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self.log.info("%s member with unknown member id joins group %s in %s state. Created a new member id %s "
                          "for this member and added it to the group",
                          "Static" if join.group_instance_id is not None else "Dynamic", group.group_id,
                          group.state, new_member_id)
            self.add_member_and_rebalance(group, new_member_id, join, callback)

    def do_join_group(self, group: GroupMetadata, join: JoinRequest, callback: JoinCallback) -> None:
        member_id = join.member_id
        if group.is_(S.DEAD):
            callback(JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(join.protocol_type, {name for name, _ in join.protocols}):
            callback(JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending_member(member_id):
            if join.group_instance_id is not None:
                # Static members are never parked as pending; Kafka treats this as an internal error.
                self.log.error("Static member %s unexpectedly found among pending members of group %s",
                               join.group_instance_id, group.group_id)
                callback(JoinGroupResult(ErrorCode.UNKNOWN_SERVER_ERROR, member_id))
                return
            self.add_member_and_rebalance(group, member_id, join, callback)
            return
        if group.is_static_member_fenced(join.group_instance_id, member_id):
            callback(JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id))
            return
        if not group.has(member_id) or (join.group_instance_id is not None
                                        and not group.has_static_member(join.group_instance_id)):
            callback(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        member = group.get(member_id)
        why = join.why
        match group.state:
            case S.PREPARING_REBALANCE:
                self.update_member_and_rebalance(
                    group, member, join,
                    f"Member {member_id} joining group during {group.state}; client reason: {why}",
                    "member_joined", callback)
            case S.COMPLETING_REBALANCE:
                if member.matches(join.protocols):
                    # It missed the JoinGroup response: hand the current generation back.
                    callback(self.current_generation_result(group, member_id, with_members=True))
                else:
                    self.update_member_and_rebalance(
                        group, member, join,
                        f"Updating metadata for member {member_id} during {group.state}; client reason: {why}",
                        "metadata_changed", callback)
            case S.STABLE:
                if group.is_leader(member_id):
                    # The leader rejoins to react to changes the member metadata does not show
                    # (e.g. new partitions), so it always gets a rebalance.
                    self.update_member_and_rebalance(
                        group, member, join,
                        f"Leader {member_id} re-joining group during {group.state}; client reason: {why}",
                        "leader_rejoined", callback)
                elif not member.matches(join.protocols):
                    self.update_member_and_rebalance(
                        group, member, join,
                        f"Updating metadata for member {member_id} during {group.state}; client reason: {why}",
                        "metadata_changed", callback)
                else:
                    callback(self.current_generation_result(group, member_id, with_members=False))
            case S.EMPTY | S.DEAD:
                self.log.warning("Attempt to add rejoining member %s of group %s in unexpected group state %s",
                                 member_id, group.group_id, group.state)
                callback(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    @staticmethod
    def current_generation_result(group: GroupMetadata, member_id: str, with_members: bool) -> JoinGroupResult:
        members = group.current_member_metadata() if with_members and group.is_leader(member_id) else []
        return JoinGroupResult(ErrorCode.NONE, member_id, group.generation_id, group.protocol_type,
                               group.protocol_name, group.leader_id or "", False, members)

    def add_member_and_rebalance(self, group: GroupMetadata, member_id: str, join: JoinRequest,
                                 callback: JoinCallback) -> None:
        member = MemberMetadata(member_id, group.group_id, join.group_instance_id, join.client_id,
                                join.client_host, join.rebalance_timeout_ms, join.session_timeout_ms,
                                join.protocol_type, join.protocols)
        member.is_new = True
        # The initial (delayed) rebalance may be extended while new members keep arriving.
        if group.is_(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member)
        self.parked.park_join(group, member, callback)
        # A new member waits in JoinGroup and cannot heartbeat; a client that disconnected would
        # otherwise stay forever, so the parked join expires after the new-member join timeout.
        self.rebalance.complete_and_schedule_next_heartbeat_expiration(group, member,
                                                                       self.config.new_member_join_timeout_ms)
        if member.is_static_member:
            self.log.info("Adding new static member %s to group %s with member id %s", join.group_instance_id,
                          group.group_id, member_id)
            group.add_static_member(join.group_instance_id, member_id)
        else:
            group.remove_pending_member(member_id)
        self.rebalance.maybe_prepare_rebalance(
            group, f"Adding new member {member_id} with group instance id {join.group_instance_id}; "
                   f"client reason: {join.why}", "member_joined", member_id)

    def update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, join: JoinRequest,
                                    reason: str, cause: str, callback: JoinCallback) -> None:
        group.update_member(member, join.protocols, join.rebalance_timeout_ms, join.session_timeout_ms)
        self.parked.park_join(group, member, callback)
        self.rebalance.maybe_prepare_rebalance(group, reason, cause, member.member_id)
