"""The record factory: every `__consumer_offsets` record the coordinator writes is built here.

A record is (key bytes, value bytes or None, headers). A delete is a null value (a tombstone).
"""
from __future__ import annotations

from collections.abc import Sequence

from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.record_batch import build_coordinator_batch, build_offset_commit_batch
from kcoord.protocol.consumer_offsets import (
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    pack_offset_commit_value_v3_no_metadata,
)
from kcoord.protocol.records import NONE

Header = tuple[str, bytes]
Record = tuple[bytes, bytes | None, Sequence[Header]]
_NO_HEADERS: tuple[Header, ...] = ()  # shared and untracked by the GC, unlike a fresh [] per record

REBALANCE_CAUSES = frozenset({
    "initial_join", "member_joined", "member_left", "session_timeout", "metadata_changed",
    "leader_rejoined", "sync_timeout", "join_timeout", "store_failure", "static_member_update",
    "group_max_size", "other",
    "subscription_changed", "rebalance_timeout", "regex_resolved",  # consumer groups (KIP-848): their own causes
    "migration",  # a group converted between the classic and the consumer protocol (online migration)
    "coordinator_moved",  # a group loaded by a new coordinator (cluster failover) rebalancing as its members come back
})


class OffsetCommitRecords(Sequence[Record]):
    """A commit's records, one OffsetCommit record per partition: a list of records to whoever reads them
    (built on first use), and `to_batch` for the writer, which builds the v2 batch straight from the values
    in the usual case (kcoord.coordinator.record_batch): the hot path of a busy coordinator never builds them."""

    __slots__ = ("group_id", "values", "_records")

    def __init__(self, group_id: str, values: dict[tuple[str, int], OffsetCommitValue]) -> None:
        self.group_id = group_id
        self.values = values
        self._records: list[Record] | None = None

    def _list(self) -> list[Record]:
        if self._records is None:
            self._records = _offset_commit_record_list(self.group_id, self.values)
        return self._records

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index):
        return self._list()[index]

    def __iter__(self):
        return iter(self._list())

    def __eq__(self, other) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def to_batch(self, compression: int = NONE, timestamp_ms: int | None = None) -> bytes:
        """The records as one v2 batch: `build_coordinator_batch(list(self), compression, timestamp_ms)`."""
        if compression == NONE:
            batch = build_offset_commit_batch(self.group_id, self.values, timestamp_ms)
            if batch is not None:
                return batch
        return build_coordinator_batch(self._list(), compression, timestamp_ms)


def offset_commit_records(group_id: str, values: dict[tuple[str, int], OffsetCommitValue]) -> OffsetCommitRecords:
    """One OffsetCommit record per partition of a commit (the last value per partition: `values` is keyed
    by partition)."""
    return OffsetCommitRecords(group_id, values)


def _offset_commit_record_list(group_id: str, values: dict[tuple[str, int], OffsetCommitValue]) -> list[Record]:
    # Keys come from a cache (a group commits the same partitions again and again) and the common
    # value (v3, no metadata, no expiry) is packed inline.
    key = encode_offset_commit_key
    pack_v3 = pack_offset_commit_value_v3_no_metadata
    encode_value = encode_offset_commit_value
    return [(key(group_id, topic, partition),
             pack_v3(3, v[0], v[3], 0, v[2]) if not v[1] and v[4] < 0 else encode_value(v),  # offset, epoch, ts
             _NO_HEADERS)
            for (topic, partition), v in values.items()]


def offset_commit_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return (encode_offset_commit_key(group_id, topic, partition), None, [])


def group_metadata_record(group: GroupMetadata, assignment: dict[str, bytes],
                          headers: list[Header] | None = None) -> Record:
    """The group after a generation: each member's metadata for the chosen protocol and its assignment.
    An Empty group is written with no members, no protocol and no leader."""
    protocol = group.protocol_name
    members = [] if protocol is None else [
        MemberMetadataValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(protocol),
                            bytes(assignment.get(m.member_id, b"")))
        for m in group.members.values()]
    value = GroupMetadataValue(group.protocol_type or "", group.generation_id, protocol,
                               group.leader_id if members else None, group.current_state_timestamp, members)
    return (encode_group_metadata_key(group.group_id), encode_group_metadata_value(value), headers or [])


def group_metadata_tombstone(group_id: str) -> Record:
    return (encode_group_metadata_key(group_id), None, [])


def rebalance_headers(group: GroupMetadata, now_ms: int, sync_done: bool) -> list[Header]:
    """The kcoord.rebalance.* headers (docs/CONTRACTS.md) for the record that ends a generation."""
    info = group.rebalance
    if info is None:
        return []
    join_done = info.join_done_ms if info.join_done_ms >= 0 else now_ms
    values = {
        "cause": info.cause,
        "reason": info.reason,
        "trigger_member": info.trigger_member,
        "start_ms": str(info.start_ms),
        "join_ms": str(join_done - info.start_ms),
        "sync_ms": str(now_ms - join_done if sync_done else 0),
    }
    return [(f"kcoord.rebalance.{k}", v.encode("utf-8")) for k, v in values.items()]
