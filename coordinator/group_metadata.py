"""GroupMetadata: a classic group's members, generation, protocol, leader and state.

Its committed offsets are the offset manager's (kcoord.coordinator.offset_manager); its parked requests the
group manager's table (kcoord.coordinator.parked). `stored` is the value of the group's last durable
GroupMetadata record, set only by replaying that record: what a load of the log would rebuild.
"""
from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass

from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.member_metadata import MemberMetadata
from kcoord.coordinator.results import JoinGroupMember
from kcoord.protocol.consumer_offsets import GroupMetadataValue


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(slots=True)
class RebalanceInfo:
    """Why and when the current rebalance started, for the log and the kcoord.rebalance.* headers."""
    cause: str
    reason: str
    trigger_member: str
    start_ms: int
    join_done_ms: int = -1


class GroupMetadata:
    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state: GroupState | None = None
        self.current_state_timestamp = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}          # insertion ordered
        self.pending_members: set[str] = set()                 # got MEMBER_ID_REQUIRED, not rejoined
        self.pending_sync_members: set[str] = set()            # joined this generation, not synced yet
        self.static_members: dict[str, str] = {}               # group.instance.id -> member id
        self.num_members_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()     # protocol -> how many members support it
        self.new_member_added = False
        # loaded by a newly elected coordinator (cluster mode): a rebalance until then, as its members come
        # back to it, is recorded with the cause "coordinator_moved"
        self.moved_until_ms: int | None = None
        self.rebalance: RebalanceInfo | None = None
        self.stored: GroupMetadataValue | None = None  # the last durable GroupMetadata record's value

    # ------------------------------------------------------------ state

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in GroupState.PREPARING_REBALANCE.valid_previous_states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in target.valid_previous_states:
            raise IllegalStateTransition(
                f"Group {self.group_id} should be in one of {sorted(map(str, target.valid_previous_states))} "
                f"before moving to {target}, but it is {self.state}")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms

    # ------------------------------------------------------------ members

    @property
    def size(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def all_members(self) -> list[str]:
        return list(self.members)

    def all_member_metadata(self) -> list[MemberMetadata]:
        return list(self.members.values())

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata) -> None:
        """Add a member that does not wait in JoinGroup (the group manager parks it if it does)."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocols())

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocols())
            self.supported_protocols += Counter()  # drop zero counts
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None and \
                    self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        self.supported_protocols.subtract(member.protocols())
        member.supported_protocols = list(protocols)
        self.supported_protocols.update(member.protocols())
        self.supported_protocols += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def add_pending_member(self, member_id: str) -> None:
        self.pending_members.add(member_id)

    def remove_pending_member(self, member_id: str) -> None:
        self.pending_members.discard(member_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    # ------------------------------------------------------------ static members

    def add_static_member(self, group_instance_id: str, member_id: str) -> None:
        self.static_members[group_instance_id] = member_id

    def remove_static_member(self, group_instance_id: str | None) -> None:
        if group_instance_id is not None:
            self.static_members.pop(group_instance_id, None)

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def current_static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """The instance id is mapped to a different member id: `member_id` is an old incarnation."""
        current = self.current_static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> MemberMetadata:
        """The member of `old_member_id` under `new_member_id` (its parked requests are answered first)."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.add_static_member(group_instance_id, new_member_id)
        return member

    # ------------------------------------------------------------ join / sync bookkeeping

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick the first member that did; False if nobody did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    # ------------------------------------------------------------ protocols

    def supports_protocols(self, member_protocol_type: str, member_protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(member_protocol_type) and bool(member_protocols)
        n = len(self.members)
        return self.protocol_type == member_protocol_type and any(
            self.supported_protocols[p] == n for p in member_protocols)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """Each member votes for its preferred protocol among those all members support; most votes
        wins. Kafka leaves ties to HashMap order; we break them by the order members joined."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=votes.__getitem__)  # Counter keeps first-vote order; max keeps the first

    def current_member_metadata(self) -> list[JoinGroupMember]:
        """The member list only the leader receives: each member's metadata for the chosen protocol."""
        if self.protocol_name is None:
            raise ValueError(f"no protocol selected for group {self.group_id}")
        return [JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def __repr__(self) -> str:
        return (f"GroupMetadata(group_id={self.group_id!r}, generation={self.generation_id}, state={self.state}, "
                f"protocol_type={self.protocol_type!r}, protocol={self.protocol_name!r}, "
                f"leader={self.leader_id!r}, members={list(self.members)})")

