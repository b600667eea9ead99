"""The five states of a classic group, how each request is answered in each, and the legal moves."""
from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    """No members; the group may still hold committed offsets.
    JoinGroup from a new member is accepted and starts the (initial, delayed) rebalance.
    SyncGroup, Heartbeat, LeaveGroup and generation-checked OffsetCommit -> UNKNOWN_MEMBER_ID.
    OffsetFetch and simple (generation -1) OffsetCommit are served.
    -> PreparingRebalance when a member joins; -> Dead when its last offset expires or it is deleted."""

    PREPARING_REBALANCE = "PreparingRebalance"
    """A rebalance has begun; JoinGroups are parked until every known member rejoined (or timeout).
    Heartbeat -> REBALANCE_IN_PROGRESS (the session timer is still reset); SyncGroup ->
    REBALANCE_IN_PROGRESS; LeaveGroup removes the member; OffsetCommit of the previous generation ok.
    -> CompletingRebalance when the join completes with members; -> Empty when nobody is left."""

    COMPLETING_REBALANCE = "CompletingRebalance"
    """The join phase ended: members hold the new generation and wait for the leader's assignment.
    SyncGroup is parked until the leader's assignment is stored; Heartbeat answered normally;
    OffsetCommit -> REBALANCE_IN_PROGRESS; a JoinGroup with changed metadata or a leave rebalances.
    -> Stable once the assignment is durable; -> PreparingRebalance on change or a store failure."""

    STABLE = "Stable"
    """The assignment is stored and propagated. Heartbeat and OffsetCommit normal; SyncGroup returns
    the member's stored assignment; a follower's JoinGroup with unchanged metadata gets the current
    generation back; a leader JoinGroup or changed metadata -> PreparingRebalance."""

    DEAD = "Dead"
    """The group is gone (deleted, expired, or its partition unloaded). Join, Sync, Heartbeat,
    LeaveGroup and OffsetCommit -> COORDINATOR_NOT_AVAILABLE; OffsetFetch returns no offsets."""

    @property
    def valid_previous_states(self) -> frozenset[GroupState]:
        return _VALID_PREVIOUS[self]

    @property
    def lower_name(self) -> str:
        """The name ListGroups' states filter matches against (case-insensitively)."""
        return self.value.lower()

    def __str__(self) -> str:
        return self.value


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}
