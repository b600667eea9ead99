"""Replay: how `__consumer_offsets` records change the coordinator's state.

The live path and the loader use the same functions: the OffsetCommit records of a commit are
applied with `replay_offset_commits` once their write is durable (tombstones of a delete or an
expiry likewise), and a load applies a partition's records with the same function, group by group.
A GroupMetadata record rebuilds its group with `group_from_metadata_value`; live, the group object
is already what the record describes. On load only the last record of each key is applied, which is
exactly what sequential replay would leave.
"""
from __future__ import annotations

from coordinator.group_metadata import GroupMetadata
from coordinator.group_state import GroupState
from coordinator.member_metadata import MemberMetadata
from protocol.consumer_offsets import GroupMetadataValue, OffsetCommitValue


def replay_offset_commits(group: GroupMetadata, records: dict[tuple[str, int], OffsetCommitValue | None]) -> None:
    """Apply OffsetCommit records ((topic, partition) -> value, None = tombstone) to the group's
    committed offsets. The live path passes the records it just wrote; the loader whole partitions."""
    group.offsets = apply_offset_records(group.offsets, records)


def apply_offset_records(offsets: dict[tuple[str, int], OffsetCommitValue],
                         records: dict[tuple[str, int], OffsetCommitValue | None]) -> dict:
    """`offsets` with `records` applied (updated in place, or a new table when it was empty).
    Also how a partition's materialised state (coordinator.partition_state) takes a log tail."""
    has_tombstones = not all(records.values())  # a value is a non-empty tuple, a tombstone None
    if not offsets and not has_tombstones:
        return records.copy()  # a fresh group on load: cloning the table beats re-inserting
    offsets.update(records)
    if has_tombstones:
        for tp, value in records.items():
            if value is None:
                del offsets[tp]
    return offsets


def replay_offset_commit(group: GroupMetadata, topic: str, partition: int, value: OffsetCommitValue | None) -> None:
    replay_offset_commits(group, {(topic, partition): value})


def group_from_metadata_value(group_id: str, value: GroupMetadataValue, now_ms: int) -> GroupMetadata:
    """A loaded group: Stable with its members and assignments, or Empty without members."""
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    group = GroupMetadata(group_id, now_ms, state)
    group.protocol_type = value.protocol_type or None  # "" was written for a group without one
    group.generation_id = value.generation
    group.protocol_name = value.protocol
    group.current_state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms
    for m in value.members:
        member = MemberMetadata(m.member_id, group_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout, m.session_timeout, value.protocol_type,
                                [(value.protocol or "", m.subscription)])
        member.assignment = m.assignment
        group.add(member)
        if m.group_instance_id is not None:
            group.add_static_member(m.group_instance_id, m.member_id)
    group.leader_id = value.leader if value.leader in group.members else group.leader_id
    return group
