"""JoinGroup (v0-v9), after the seeds: handle_join_group -> do_unknown_join_group / do_join_group ->
add_member_and_rebalance / update_member_and_rebalance -> maybe_prepare_rebalance.

    v0   no rebalance timeout: the caller passes the session timeout as rebalance_timeout_ms
    v4   MEMBER_ID_REQUIRED for dynamic members joining with an empty member id (KIP-394)
    v5   group.instance.id: static membership (KIP-345)
    v7   protocol type in the response (KIP-559; the broker decides what to encode)
    v8   reason, logged (KIP-800)
    v9   skip_assignment for a static leader rejoining a Stable group (KIP-814)
"""
from __future__ import annotations

from collections.abc import Callable

from coordinator.group_metadata import GroupMetadata
from coordinator.group_state import GroupState
from coordinator.member_metadata import MemberMetadata
from coordinator.rebalance import RebalanceMixin
from coordinator.results import JoinGroupResult
from protocol.errors import ErrorCode

S = GroupState
UNKNOWN_MEMBER_ID = ""
JoinCallback = Callable[[JoinGroupResult], None]


def _reason(reason: str | None) -> str:
    return "not provided" if reason is None else reason


class JoinGroupMixin(RebalanceMixin):

    def handle_join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                          require_known_member_id: bool, client_id: str, client_host: str,
                          rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                          protocols: list[tuple[str, bytes]], reason: str | None, request_version: int,
                          callback: JoinCallback) -> None:
        error = self.validate_group_status(group_id)
        if error is not None:
            callback(JoinGroupResult(error, member_id))
            return
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            callback(JoinGroupResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id))
            return
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        group = self.get_or_maybe_create_group(group_id, is_unknown_member)
        if group is None:
            callback(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        # Static members never need a server-assigned id round trip.
        require_known_member_id = require_known_member_id and group_instance_id is None
        if not self.accept_joining_member(group, member_id):
            self.log.info("Rejecting member %s of group %s: group.max.size %d reached", member_id or client_id,
                          group_id, self.config.group_max_size,
                          extra={"group_id": group_id, "event": "group_max_size", "member_id": member_id})
            group.remove(member_id)
            # Only forget the instance id if it named the rejected member; a full group must not
            # lose the mapping of a static member that is still in it.
            if group.current_static_member_id(group_instance_id) == member_id:
                group.remove_static_member(group_instance_id)
            self.remove_heartbeat_for_leaving_member(group, member_id)
            callback(JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
        elif is_unknown_member:
            self.do_unknown_join_group(group, group_instance_id, require_known_member_id, client_id, client_host,
                                       rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                       reason, request_version, callback)
        else:
            self.do_join_group(group, member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                               session_timeout_ms, protocol_type, protocols, reason, callback)
        # Every join may be the last one the parked rebalance was waiting for.
        if group.is_(S.PREPARING_REBALANCE):
            self.join_purgatory.check_and_complete(group_id)

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

    def do_unknown_join_group(self, group: GroupMetadata, group_instance_id: str | None,
                              require_known_member_id: bool, client_id: str, client_host: str,
                              rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                              protocols: list[tuple[str, bytes]], reason: str | None, request_version: int,
                              callback: JoinCallback) -> None:
        if group.is_(S.DEAD):
            # The group was unloaded or deleted meanwhile: send the client to find its coordinator.
            callback(JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
            return
        new_member_id = group.generate_member_id(client_id, group_instance_id)
        if group.has_static_member(group_instance_id):
            old_member_id = group.current_static_member_id(group_instance_id)
            self.log.info("Static member %s of group %s with unknown member id rejoins, assigning new member id "
                          "%s (old %s); client reason: %s", group_instance_id, group.group_id, new_member_id,
                          old_member_id, _reason(reason))
            self.update_static_member_and_rebalance(group, old_member_id, new_member_id, group_instance_id,
                                                    protocols, rebalance_timeout_ms, session_timeout_ms, reason,
                                                    request_version >= 9, callback)
        elif require_known_member_id:
            # KIP-394: park the id as pending and make the client come back with it.
            group.add_pending_member(new_member_id)
            self.add_pending_member_expiration(group, new_member_id, session_timeout_ms)
            self.log.debug("Dynamic member with unknown member id joins group %s in %s state; created member id "
                           "%s and requested a rejoin with it", group.group_id, group.state, new_member_id)
            callback(JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self.log.info("%s member with unknown member id joins group %s in %s state. Created a new member id %s "
                          "for this member and added it to the group",
                          "Static" if group_instance_id is not None else "Dynamic", group.group_id, group.state,
                          new_member_id)
            self.add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, new_member_id,
                                          group_instance_id, client_id, client_host, protocol_type, protocols,
                                          group, reason, callback)

    def do_join_group(self, group: GroupMetadata, member_id: str, group_instance_id: str | None, client_id: str,
                      client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                      protocols: list[tuple[str, bytes]], reason: str | None, callback: JoinCallback) -> None:
        if group.is_(S.DEAD):
            callback(JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending_member(member_id):
            if group_instance_id is not None:
                # Static members are never parked as pending; Kafka treats this as an internal error.
                self.log.error("Static member %s unexpectedly found among pending members of group %s",
                               group_instance_id, group.group_id)
                callback(JoinGroupResult(ErrorCode.UNKNOWN_SERVER_ERROR, member_id))
                return
            self.add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, member_id, None, client_id,
                                          client_host, protocol_type, protocols, group, reason, callback)
            return
        if group.is_static_member_fenced(group_instance_id, member_id):
            callback(JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id))
            return
        if not group.has(member_id) or (group_instance_id is not None
                                        and not group.has_static_member(group_instance_id)):
            callback(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        member = group.get(member_id)
        why = _reason(reason)
        match group.state:
            case S.PREPARING_REBALANCE:
                self.update_member_and_rebalance(
                    group, member, rebalance_timeout_ms, session_timeout_ms, protocols,
                    f"Member {member_id} joining group during {group.state}; client reason: {why}",
                    "member_joined", callback)
            case S.COMPLETING_REBALANCE:
                if member.matches(protocols):
                    # It missed the JoinGroup response: hand the current generation back.
                    callback(self._current_generation_result(group, member_id, with_members=True))
                else:
                    self.update_member_and_rebalance(
                        group, member, rebalance_timeout_ms, session_timeout_ms, protocols,
                        f"Updating metadata for member {member_id} during {group.state}; client reason: {why}",
                        "metadata_changed", callback)
            case S.STABLE:
                if group.is_leader(member_id):
                    # The leader rejoins to react to changes the member metadata does not show
                    # (e.g. new partitions), so it always gets a rebalance.
                    self.update_member_and_rebalance(
                        group, member, rebalance_timeout_ms, session_timeout_ms, protocols,
                        f"Leader {member_id} re-joining group during {group.state}; client reason: {why}",
                        "leader_rejoined", callback)
                elif not member.matches(protocols):
                    self.update_member_and_rebalance(
                        group, member, rebalance_timeout_ms, session_timeout_ms, protocols,
                        f"Updating metadata for member {member_id} during {group.state}; client reason: {why}",
                        "metadata_changed", callback)
                else:
                    callback(self._current_generation_result(group, member_id, with_members=False))
            case S.EMPTY | S.DEAD:
                self.log.warning("Attempt to add rejoining member %s of group %s in unexpected group state %s",
                                 member_id, group.group_id, group.state)
                callback(JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _current_generation_result(self, group: GroupMetadata, member_id: str, with_members: bool) -> JoinGroupResult:
        members = group.current_member_metadata() if with_members and group.is_leader(member_id) else []
        return JoinGroupResult(ErrorCode.NONE, member_id, group.generation_id, group.protocol_type,
                               group.protocol_name, group.leader_id or "", False, members)

    def add_member_and_rebalance(self, rebalance_timeout_ms: int, session_timeout_ms: int, member_id: str,
                                 group_instance_id: str | None, client_id: str, client_host: str,
                                 protocol_type: str, protocols: list[tuple[str, bytes]], group: GroupMetadata,
                                 reason: str | None, callback: JoinCallback) -> None:
        member = MemberMetadata(member_id, group.group_id, group_instance_id, client_id, client_host,
                                rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        # The initial (delayed) rebalance may be extended while new members keep arriving.
        if group.is_(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member, callback)
        # A new member waits in JoinGroup and cannot heartbeat; a client that disconnected would
        # otherwise stay forever, so the parked join expires after the new-member join timeout.
        self.complete_and_schedule_next_heartbeat_expiration(group, member, self.config.new_member_join_timeout_ms)
        if member.is_static_member:
            self.log.info("Adding new static member %s to group %s with member id %s", group_instance_id,
                          group.group_id, member_id)
            group.add_static_member(group_instance_id, member_id)
        else:
            group.remove_pending_member(member_id)
        self.maybe_prepare_rebalance(
            group, f"Adding new member {member_id} with group instance id {group_instance_id}; "
                   f"client reason: {_reason(reason)}", "member_joined", member_id)

    def update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, rebalance_timeout_ms: int,
                                    session_timeout_ms: int, protocols: list[tuple[str, bytes]], reason: str,
                                    cause: str, callback: JoinCallback) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self.maybe_prepare_rebalance(group, reason, cause, member.member_id)

    def update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                           group_instance_id: str, protocols: list[tuple[str, bytes]],
                                           rebalance_timeout_ms: int, session_timeout_ms: int,
                                           reason: str | None, supports_skipping_assignment: bool,
                                           callback: JoinCallback) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        # The old id's heartbeat timer is left to expire harmlessly; the new id gets its own.
        self.remove_heartbeat_for_leaving_member(group, old_member_id)
        self.complete_and_schedule_next_heartbeat_expiration(group, member)
        old_protocols = member.supported_protocols
        old_rebalance_timeout, old_session_timeout = member.rebalance_timeout_ms, member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        why = _reason(reason)
        match group.state:
            case S.STABLE:
                if group.protocol_name == group.select_protocol():
                    self.log.info("Static member %s of group %s rejoined with unchanged protocol; no rebalance",
                                  group_instance_id, group.group_id,
                                  extra={"group_id": group.group_id, "event": "static_member_replaced",
                                         "member_id": new_member_id})
                    assignment = {m.member_id: m.assignment for m in group.all_member_metadata()}

                    def on_stored(error: ErrorCode) -> None:
                        if error != ErrorCode.NONE:
                            self.log.warning("Failed to persist metadata for group %s: %s", group.group_id,
                                             error.name)
                            # Revert: the old member id stays the one the log knows.
                            group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout,
                                                None)
                            old = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                            self.remove_heartbeat_for_leaving_member(group, new_member_id)
                            self.complete_and_schedule_next_heartbeat_expiration(group, old)
                            callback(JoinGroupResult(error, UNKNOWN_MEMBER_ID, group.generation_id,
                                                     group.protocol_type, group.protocol_name, current_leader))
                        elif supports_skipping_assignment:
                            # KIP-814: the leader learns it leads but must not run the assignor again.
                            is_leader = group.is_leader(new_member_id)
                            group.maybe_invoke_join_callback(member, JoinGroupResult(
                                ErrorCode.NONE, new_member_id, group.generation_id, group.protocol_type,
                                group.protocol_name, group.leader_id or "", is_leader,
                                group.current_member_metadata() if is_leader else []))
                        else:
                            # Before v9, answer with the old leader id so the rejoined leader acts as a
                            # follower and does not compute an assignment a Stable group would ignore.
                            group.maybe_invoke_join_callback(member, JoinGroupResult(
                                ErrorCode.NONE, new_member_id, group.generation_id, group.protocol_type,
                                group.protocol_name, current_leader, False, []))

                    self.store_group(group, assignment, on_stored)
                else:
                    self.maybe_prepare_rebalance(
                        group, f"Group's selectedProtocol will change because static member {new_member_id} with "
                               f"instance id {group_instance_id} joined with change of protocol; client reason: {why}",
                        "static_member_update", new_member_id)
            case S.COMPLETING_REBALANCE:
                # The leader may already have assigned to the old id, so the new id needs a rebalance.
                self.prepare_rebalance(
                    group, f"Updating metadata for static member {new_member_id} with instance id "
                           f"{group_instance_id}; client reason: {why}", "static_member_update", new_member_id)
            case S.PREPARING_REBALANCE:
                pass  # parked with the others
            case S.EMPTY | S.DEAD:
                raise AssertionError(f"static member {group_instance_id} known to group {group.group_id} "
                                     f"in state {group.state}")
