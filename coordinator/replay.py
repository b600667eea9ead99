"""What a record's value does to state, shared by the live path and the loader.

`apply_offset_records` folds OffsetCommit records into a group's table of committed offsets: the offset
manager's replay uses it for a commit that just became durable and for a whole loaded partition, and a
partition's materialised state (kcoord.coordinator.partition_state, the checkpoints' form) uses it for a log
tail. `group_from_metadata_value` builds a group from its GroupMetadata record, as a load does.
"""
from __future__ import annotations

from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.member_metadata import MemberMetadata
from kcoord.protocol.consumer_offsets import GroupMetadataValue, OffsetCommitValue


def apply_offset_records(offsets: dict[tuple[str, int], OffsetCommitValue],
                         records: dict[tuple[str, int], OffsetCommitValue | None]) -> dict:
    """`offsets` with `records` applied ((topic, partition) -> value, None = tombstone): updated in place,
    or a new table when it was empty."""
    has_tombstones = not all(records.values())  # a value is a non-empty tuple, a tombstone None
    if not offsets and not has_tombstones:
        return records.copy()  # a fresh group on load: cloning the table beats re-inserting
    offsets.update(records)
    if has_tombstones:
        for tp, value in records.items():
            if value is None:
                del offsets[tp]
    return offsets


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
    group.stored = value
    return group
