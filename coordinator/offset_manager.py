"""OffsetMetadataManager: the committed offsets of one shard's groups, and the commits in flight.

OffsetCommit: v2-v4 retention_time_ms (an expire timestamp, written as OffsetCommitValue v1);
              v5 drops it; v6 leader epoch; v7 group.instance.id; v9 GROUP_ID_NOT_FOUND for an
              unknown group committed to with a generation (ILLEGAL_GENERATION before v9).
OffsetFetch:  v2 null topics = every offset of the group; v7 require_stable; v8 several groups
              per request (one call per group).
Retention (KIP-211), OffsetDelete (KIP-496) and deleted topics produce tombstones.

A commit's offsets are pending until its records are durable; only then are they applied, by
`replay_offsets` (the loader's replay too), and only then is the client answered. Tombstones of a
delete or an expiry likewise change nothing until they are durable.
"""
from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING

from kcoord.coordinator.consumer.offsets import (
    AssignmentEpochCheck,
    validate_offset_commit,
    validate_transactional_offset_commit,
)
from kcoord.coordinator.core import map_write_error
from kcoord.coordinator.group_manager import subscribed_topics
from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.records import Record, offset_commit_records, offset_commit_tombstone
from kcoord.coordinator.replay import apply_offset_records
from kcoord.coordinator.results import (
    OffsetCommit,
    OffsetCommitRequestPartition,
    OffsetFetchPartition,
    OffsetFetchResult,
)
from kcoord.coordinator.txn_offsets import (
    PendingTransactionalOffsets,
    TxnMarkerRecords,
    TxnOffsetCommitRecords,
    txn_offset_commit_error,
    validate_txn_offset_commit,
)
from kcoord.protocol.consumer_offsets import OffsetCommitValue
from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kcoord.coordinator.group_manager import GroupMetadataManager

S = GroupState
TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, OffsetCommitValue]
CommitCallback = Callable[[dict[TopicPartition, ErrorCode]], None]
_new_tuple = tuple.__new__  # builds an OffsetCommitValue without NamedTuple's Python-level __new__
_commit_value = functools.partial(_new_tuple, OffsetCommitValue)
_topic, _partition, _offset, _epoch, _metadata = (itemgetter(i) for i in range(5))  # OffsetCommitRequestPartition
_NO_OFFSETS: Offsets = {}

_COMMIT_WRITE_ERRORS = {
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


def _values_with_metadata(offsets: list[OffsetCommitRequestPartition], now: int, expire: int,
                          limit: int) -> tuple[Offsets, dict[TopicPartition, ErrorCode]]:
    """(values to write, partitions refused for metadata over `limit` bytes) of a commit."""
    written: Offsets = {}
    too_large: dict[TopicPartition, ErrorCode] = {}
    for topic, partition, offset, leader_epoch, metadata in offsets:
        tp = (topic, partition)
        metadata = metadata or ""
        # UTF-8 takes at most 4 bytes a character: only long metadata needs encoding to be measured.
        if len(metadata) * 4 > limit and len(metadata.encode("utf-8")) > limit:
            too_large[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            continue
        if too_large:
            too_large.pop(tp, None)  # a later entry for the same partition decides, as before
        written[tp] = _new_tuple(OffsetCommitValue, (offset, metadata, now, leader_epoch, expire, None))
    return written, too_large


class OffsetMetadataManager:
    def __init__(self, group_manager: GroupMetadataManager) -> None:
        self.group_manager = group_manager
        self.config = group_manager.config
        self.log = group_manager.log
        self.offsets: dict[str, Offsets] = {}                      # group id -> committed, never empty
        self.pending: dict[str, dict[TopicPartition, int]] = {}    # group id -> writes in flight per partition
        self.transactional = PendingTransactionalOffsets()         # TxnOffsetCommit's, until their marker
        self.consumer_groups: dict = {}  # the shard's consumer groups (KIP-848): they validate their own commits
        self.topic_id: Callable[[str], uuid.UUID | None] = lambda name: None  # the shard's topics image (KIP-1251)

    def committed(self, group_id: str) -> Offsets:
        return self.offsets.get(group_id, _NO_OFFSETS)

    # ------------------------------------------------------------ replay

    def replay_offsets(self, group_id: str, records: dict[TopicPartition, OffsetCommitValue | None]) -> None:
        """Apply durable OffsetCommit records of one group (None: a tombstone)."""
        live = apply_offset_records(self.offsets.get(group_id) or {}, records)
        if self.transactional.open_by_group and not all(records.values()):  # tombstones drop pending ones too
            self.transactional.drop(group_id, [tp for tp, v in records.items() if v is None])
        if live:
            self.offsets[group_id] = live
            self.group_manager.ensure_group(group_id)
        else:
            self.offsets.pop(group_id, None)

    # ------------------------------------------------------------ OffsetCommit

    def handle_commit_offsets(self, request: OffsetCommit, callback: CommitCallback) -> None:
        consumer_group = self.consumer_groups.get(request.group_id)
        if consumer_group is not None:
            error, check = validate_offset_commit(consumer_group, request.member_id, request.generation_id,
                                                  request.api_version)
            if error != ErrorCode.NONE:
                return self._fail(request, error, callback)
            offsets, callback = self._checked(request.offsets, check, callback, ErrorCode.STALE_MEMBER_EPOCH)
            if not offsets:
                return callback({})
            return self.store_offsets(request.group_id, offsets, callback, request.retention_time_ms)
        group = self.group_manager.get_group(request.group_id)
        if group is None:
            if request.generation_id >= 0:
                # Committing as a member of a group that does not exist.
                error = ErrorCode.GROUP_ID_NOT_FOUND if request.api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
                return self._fail(request, error, callback)
            # A "simple" group (manual assignment, admin tools): the offsets only; the replay of their
            # records makes the group.
            return self.store_offsets(request.group_id, request.offsets, callback, request.retention_time_ms)
        self.do_commit_offsets(group, request, callback)

    def _checked(self, offsets: list[OffsetCommitRequestPartition], check: AssignmentEpochCheck | None,
                 callback: CommitCallback, refused: ErrorCode) -> tuple[list[OffsetCommitRequestPartition], CommitCallback]:
        """KIP-1251's per-partition check of a commit from an older member epoch: the partitions it lets
        through, and the callback that adds `refused` for the others to their results."""
        if check is None:
            return offsets, callback
        passed, stale = [], {}
        for p in offsets:
            if check.allows(self.topic_id(p.topic), p.partition):
                passed.append(p)
            else:
                stale[(p.topic, p.partition)] = refused
        if not stale:
            return offsets, callback
        return passed, lambda results: callback({**results, **stale})

    @staticmethod
    def _fail(request: OffsetCommit, error: ErrorCode, callback: CommitCallback) -> None:
        callback({(p.topic, p.partition): error for p in request.offsets})

    def do_commit_offsets(self, group: GroupMetadata, request: OffsetCommit, callback: CommitCallback) -> None:
        if group.is_(S.DEAD):
            return self._fail(request, ErrorCode.COORDINATOR_NOT_AVAILABLE, callback)
        if request.generation_id < 0 and group.is_(S.EMPTY):
            return self.store_offsets(group.group_id, request.offsets, callback, request.retention_time_ms)
        if group.is_static_member_fenced(request.group_instance_id, request.member_id):
            return self._fail(request, ErrorCode.FENCED_INSTANCE_ID, callback)
        if not group.has(request.member_id):
            return self._fail(request, ErrorCode.UNKNOWN_MEMBER_ID, callback)
        if request.generation_id != group.generation_id:
            return self._fail(request, ErrorCode.ILLEGAL_GENERATION, callback)
        match group.state:
            case S.STABLE | S.PREPARING_REBALANCE:
                # A commit proves the member alive (and the previous generation may still commit).
                self.group_manager.rebalance.complete_and_schedule_next_heartbeat_expiration(
                    group, group.get(request.member_id))
                self.store_offsets(group.group_id, request.offsets, callback, request.retention_time_ms)
            case _:  # CompletingRebalance: the assignment is about to change
                self._fail(request, ErrorCode.REBALANCE_IN_PROGRESS, callback)

    def store_offsets(self, group_id: str, offsets: list[OffsetCommitRequestPartition],
                      callback: CommitCallback, retention_time_ms: int = -1) -> None:
        # The hot path of a busy coordinator: the table of values that is both written (one record per
        # partition) and, once durable, replayed.
        now = self.group_manager.now_ms()
        expire = now + retention_time_ms if retention_time_ms >= 0 else -1
        # The last value per partition wins, as on replay.
        if not any(map(_metadata, offsets)):
            # No metadata (what consumers nearly always commit): the table is made in C, no step per partition.
            values = map(_commit_value, zip(map(_offset, offsets), repeat(""), repeat(now), map(_epoch, offsets),
                                            repeat(expire), repeat(None), strict=False))  # repeat() never ends
            written = dict(zip(zip(map(_topic, offsets), map(_partition, offsets), strict=True), values, strict=True))
            too_large: dict[TopicPartition, ErrorCode] = {}
        else:
            written, too_large = _values_with_metadata(offsets, now, expire, self.config.offset_metadata_max_bytes)
        results: dict[TopicPartition, ErrorCode] = dict.fromkeys(written, ErrorCode.NONE)
        results.update(too_large)
        if not written:
            callback(results)
            return
        pending = self.pending.get(group_id)
        if pending:
            for tp in written:
                pending[tp] = pending.get(tp, 0) + 1
        else:
            self.pending[group_id] = dict.fromkeys(written, 1)

        def on_written(error: ErrorCode) -> None:
            self._release_pending(group_id, written)
            if error != ErrorCode.NONE:
                mapped = _COMMIT_WRITE_ERRORS.get(error) or map_write_error(error)
                self.log.warning("Offset commit for group %s failed: %s", group_id, error.name)
                for tp in written:
                    results[tp] = mapped
            callback(results)

        self.group_manager.write(offset_commit_records(group_id, written), on_written)

    def _release_pending(self, group_id: str, written: Offsets) -> None:
        """One write of `written` is no longer in flight."""
        pending = self.pending.get(group_id)
        if pending is None:
            return
        # Usually this write was the only one in flight for its partitions: then the table holds exactly
        # its partitions (each is present until this write releases it), each counted once.
        if len(pending) == len(written) and max(pending.values()) == 1:
            del self.pending[group_id]
            return
        for tp in written:
            left = pending.get(tp, 0) - 1
            if left > 0:
                pending[tp] = left
            else:
                pending.pop(tp, None)
        if not pending:
            del self.pending[group_id]

    # ------------------------------------------------------------ TxnOffsetCommit (KIP-98/447)

    def handle_txn_commit_offsets(self, request: OffsetCommit, producer_id: int, producer_epoch: int,
                                  callback: CommitCallback) -> None:
        """OffsetMetadataManager.commitTransactionalOffset: validate, then write the offsets as a
        transactional batch; they are pending (kcoord.coordinator.txn_offsets) until the transaction's marker."""
        check = None
        if (consumer_group := self.consumer_groups.get(request.group_id)) is not None:
            error, check = validate_transactional_offset_commit(consumer_group, request.member_id,
                                                                request.generation_id)
        elif (group := self.group_manager.get_group(request.group_id)) is None:
            error = ErrorCode.ILLEGAL_GENERATION if request.generation_id >= 0 else ErrorCode.NONE
        else:
            error = validate_txn_offset_commit(group, request.member_id, request.group_instance_id,
                                               request.generation_id)
        if error != ErrorCode.NONE:
            return self._fail(request, error, callback)
        offsets, callback = self._checked(request.offsets, check, callback, ErrorCode.ILLEGAL_GENERATION)
        written, too_large = _values_with_metadata(offsets, self.group_manager.now_ms(), -1,
                                                   self.config.offset_metadata_max_bytes)
        results: dict[TopicPartition, ErrorCode] = dict.fromkeys(written, ErrorCode.NONE)
        results.update(too_large)
        if not written:
            return callback(results)

        def on_written(error: ErrorCode) -> None:
            if error != ErrorCode.NONE:
                mapped = txn_offset_commit_error(error, map_write_error)
                for tp in written:
                    results[tp] = mapped
            callback(results)

        self.group_manager.write(TxnOffsetCommitRecords(request.group_id, written, producer_id, producer_epoch), on_written)

    def end_transaction_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                               commit: bool) -> TxnMarkerRecords | None:
        """The marker to write, or None (TRANSACTION_COORDINATOR_FENCED) for one from an older coordinator epoch
        than the producer's last one here (kcoord.coordinator.txn_offsets), refused before anything is written."""
        if not self.transactional.on_marker(producer_id, coordinator_epoch):
            self.log.info("Refusing the marker of producer %d: coordinator epoch %d is older than the last one's",
                          producer_id, coordinator_epoch)
            return None
        return TxnMarkerRecords(producer_id, producer_epoch, commit, coordinator_epoch)

    def replay_end_transaction_marker(self, producer_id: int, commit: bool) -> None:
        """The transaction's marker is durable: its pending offsets become committed, or are dropped."""
        ended = self.transactional.end(producer_id)
        if commit:
            for group_id, values in ended.items():
                self.replay_offsets(group_id, values)

    # ------------------------------------------------------------ OffsetFetch

    def handle_fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None,
                             require_stable: bool = False) -> OffsetFetchResult:
        """`partitions` None = every committed offset of the group (v2+)."""
        offsets = self.offsets.get(group_id, _NO_OFFSETS)
        pending = self.pending.get(group_id, _NO_OFFSETS)
        out = []
        for tp in (list(offsets) if partitions is None else partitions):
            if require_stable and (tp in pending or self.transactional.has_pending(group_id, tp)):
                out.append(OffsetFetchPartition(tp[0], tp[1], error=ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            v = offsets.get(tp)
            if v is None:
                out.append(OffsetFetchPartition(tp[0], tp[1]))
            else:
                out.append(OffsetFetchPartition(tp[0], tp[1], v.offset, v.leader_epoch, v.metadata))
        return OffsetFetchResult(group_id, ErrorCode.NONE, out)

    # ------------------------------------------------------------ tombstones

    def delete_all_offsets(self, group_id: str) -> list[Record]:
        """Tombstones for every committed offset of the group (DeleteGroups), and for partitions with only
        pending transactional offsets (their replay drops those, as Kafka's deleteAllOffsets)."""
        committed = self.committed(group_id)
        pending_only = self.transactional.partitions(group_id) - committed.keys()
        return [offset_commit_tombstone(group_id, t, p) for t, p in [*committed, *sorted(pending_only)]]

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                       ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode], list[Record]]:
        """KIP-496: tombstones for committed offsets of topics the group does not consume:
        (top-level error, per-partition errors, records)."""
        consumer_group = self.consumer_groups.get(group_id)
        group = self.group_manager.get_group(group_id)
        if consumer_group is not None:  # KIP-848: any state; not the topics it subscribes to
            subscribed = consumer_group.subscribed_topic_names()
        elif group is None or group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}, []
        elif not group.is_(S.EMPTY) and group.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, {}, []
        else:
            subscribed = (subscribed_topics(group) or set()) if not group.is_(S.EMPTY) else set()
        committed, pending = self.committed(group_id), self.pending.get(group_id, _NO_OFFSETS)
        results: dict[TopicPartition, ErrorCode] = {}
        records: list[Record] = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if tp in committed or tp in pending:
                records.append(offset_commit_tombstone(group_id, *tp))
        return ErrorCode.NONE, results, records

    def topics_deleted(self, topics: set[str]) -> list[Record]:
        """Deleted topics take their committed offsets with them (tombstones for every group)."""
        return [offset_commit_tombstone(group_id, t, p) for group_id, offsets in self.offsets.items()
                for t, p in offsets if t in topics]

    def expired_offsets(self, group: GroupMetadata, now_ms: int) -> list[TopicPartition]:
        """KIP-211: which of the group's committed offsets have expired."""
        retention = self.config.offsets_retention_ms
        offsets = self.committed(group.group_id)
        pending = self.pending.get(group.group_id, _NO_OFFSETS)

        def expired(base: Callable[[OffsetCommitValue], int], keep_topics: set[str]) -> list[TopicPartition]:
            out = []
            for tp, v in offsets.items():
                if tp[0] in keep_topics or tp in pending:
                    continue
                if (now_ms >= v.expire_timestamp) if v.expire_timestamp >= 0 else (now_ms - base(v) >= retention):
                    out.append(tp)
            return out

        if group.protocol_type is not None and group.is_(S.EMPTY):
            # Nobody consumes: the clock runs from the moment the group became Empty.
            state_ts = group.current_state_timestamp
            return expired(lambda v: state_ts if state_ts >= 0 else v.commit_timestamp, set())
        if group.protocol_type == "consumer" and group.is_(S.STABLE):
            topics = subscribed_topics(group)
            if topics is not None:
                # Offsets of topics still read are never expired; others age from their commit.
                return expired(lambda v: v.commit_timestamp, topics)
            return []
        if group.protocol_type is None:
            return expired(lambda v: v.commit_timestamp, set())  # a simple group: from the commit
        return []
