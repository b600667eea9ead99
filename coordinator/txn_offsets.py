"""Transactional offsets (KIP-98/447): TxnOffsetCommit's offsets, pending per producer until the
transaction's marker commits them (applied as committed offsets) or aborts them (dropped).

Kafka's OffsetMetadataManager.commitTransactionalOffset / replay(producerId, ...) /
replayEndTransactionMarker and GroupCoordinatorShard.replayEndTransactionMarker, in kcoord's shape:

* `TxnOffsetCommitRecords` are a commit's OffsetCommit records written as a *transactional* batch
  (the producer id and epoch in the batch header, as Kafka's coordinator runtime writes them);
  replaying them (live, once durable; or by a load that found no marker yet) makes them pending.
* `TxnMarkerRecords` is the COMMIT/ABORT control batch the transaction coordinator's marker writes to
  `__consumer_offsets-N`, with that coordinator's epoch; replaying it applies or drops that producer's
  pending offsets.
* A marker from an older coordinator epoch than the producer's last one here is refused
  (TRANSACTION_COORDINATOR_FENCED): Kafka's runtime appends the marker with its coordinator epoch
  (CoordinatorRuntime.completeTransaction) and the log's ProducerAppendInfo.checkCoordinatorEpoch refuses
  a zombie's. The last epoch per producer is taken at the append (as the log's producer state is) and
  read back from the markers a load reads. In a cluster an elected shard reads its whole log; a single
  node's load from a checkpoint does not read the markers it covers again, and forgets their fence
  (Kafka keeps it in its producer snapshots) -- there, no other coordinator can have written one.
* While a group has pending offsets for a partition, OffsetFetch with require_stable answers
  UNSTABLE_OFFSET_COMMIT for it, and the group is not expired.
The loader (kcoord.coordinator.checkpoint_store) holds transactional records back until their marker, so a
replay of the log applies exactly the committed ones; those still open at the end become pending.
A committed transaction's offsets take effect at its marker, live, on load and through compaction
(kcoord.storage.cleaner) alike; Kafka instead keeps whichever commit record has the larger log offset, which
differs only when the group also commits outside the transaction between its offsets and its marker.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.records import Record, _offset_commit_record_list
from kcoord.protocol.consumer_offsets import OffsetCommitValue, decode_key, decode_offset_commit_value
from kcoord.protocol.control_records import end_txn_marker_batch
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import build_batch

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, OffsetCommitValue]


class TxnOffsetCommitRecords(Sequence[Record]):
    """One TxnOffsetCommit's records: a transactional batch of OffsetCommit records."""

    __slots__ = ("group_id", "values", "producer_id", "producer_epoch")

    def __init__(self, group_id: str, values: Offsets, producer_id: int, producer_epoch: int) -> None:
        self.group_id = group_id
        self.values = values
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index):
        return _offset_commit_record_list(self.group_id, self.values)[index]

    def to_batch(self, compression: int = 0, timestamp_ms: int | None = None) -> bytes:
        return build_batch(_offset_commit_record_list(self.group_id, self.values), compression=compression,
                           producer_id=self.producer_id, producer_epoch=self.producer_epoch, transactional=True,
                           timestamp_ms=timestamp_ms)

    def replay_into(self, shard) -> None:
        shard.offset_manager.transactional.replay_offsets(self.producer_id, self.group_id, self.values)


class TxnMarkerRecords(Sequence[Record]):
    """The COMMIT/ABORT marker of one producer's transaction (a control batch, no data records)."""

    __slots__ = ("producer_id", "producer_epoch", "commit", "coordinator_epoch")

    def __init__(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.commit = commit
        self.coordinator_epoch = coordinator_epoch

    def __len__(self) -> int:
        return 0

    def __getitem__(self, index):
        raise IndexError(index)

    def to_batch(self, compression: int = 0, timestamp_ms: int | None = None) -> bytes:
        return end_txn_marker_batch(self.producer_id, self.producer_epoch, self.commit, self.coordinator_epoch,
                                    timestamp_ms=timestamp_ms)

    def replay_into(self, shard) -> None:
        shard.offset_manager.replay_end_transaction_marker(self.producer_id, self.commit)


@dataclass(slots=True)
class PendingTransactionalOffsets:
    """producer id -> group -> partition -> the pending value (Kafka's pendingTransactionalOffsets and
    openTransactionsByGroup)."""
    by_producer: dict[int, dict[str, Offsets]]
    open_by_group: dict[str, set[int]]
    coordinator_epochs: dict[int, int]  # producer id -> coordinator epoch of its last marker here

    def __init__(self) -> None:
        self.by_producer = {}
        self.open_by_group = {}
        self.coordinator_epochs = {}

    def on_marker(self, producer_id: int, coordinator_epoch: int) -> bool:
        """A marker from `coordinator_epoch` is about to be written: False if it comes from a zombie (a newer
        coordinator already wrote one), else its epoch is the producer's last one now."""
        if self.coordinator_epochs.get(producer_id, -1) > coordinator_epoch:
            return False
        self.coordinator_epochs[producer_id] = coordinator_epoch
        return True

    def replay_offsets(self, producer_id: int, group_id: str, values: Offsets) -> None:
        self.by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(values)
        self.open_by_group.setdefault(group_id, set()).add(producer_id)

    def load(self, state) -> None:
        """What a load read (kcoord.coordinator.partition_state.PartitionState): its transactions without a
        marker yet (once, whatever the slices) and the coordinator epochs of the markers it read."""
        self.coordinator_epochs.update(state.marker_epochs)
        while state.transactional:
            self.replay_records(*state.transactional.popitem())

    def replay_records(self, producer_id: int, records) -> None:
        """Transactional (key, value) records read from the log by a load (their marker not yet seen)."""
        for key, value, *_ in records:
            k = decode_key(key)
            if hasattr(k, "topic") and value is not None:
                self.replay_offsets(producer_id, k.group, {(k.topic, k.partition): decode_offset_commit_value(value)})

    def end(self, producer_id: int) -> dict[str, Offsets]:
        """The producer's transaction ended: its pending offsets by group, no longer pending."""
        offsets = self.by_producer.pop(producer_id, {})
        for group_id in offsets:
            producers = self.open_by_group.get(group_id)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self.open_by_group[group_id]
        return offsets

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in self.by_producer[pid].get(group_id, ()) for pid in self.open_by_group.get(group_id, ()))

    def has_group(self, group_id: str) -> bool:
        return group_id in self.open_by_group

    def partitions(self, group_id: str) -> set[TopicPartition]:
        return {tp for pid in self.open_by_group.get(group_id, ()) for tp in self.by_producer[pid].get(group_id, ())}

    def drop(self, group_id: str, tps) -> None:
        """A (non-transactional) tombstone removes the partitions' pending offsets too."""
        for pid in list(self.open_by_group.get(group_id, ())):
            group = self.by_producer[pid].get(group_id, {})
            for tp in tps:
                group.pop(tp, None)


# What TxnOffsetCommit's write errors answer (Kafka's GroupCoordinatorService.commitTransactionalOffsets:
# the same mapping as OffsetCommit's).
def txn_offset_commit_error(error: ErrorCode, mapper: Callable[[ErrorCode], ErrorCode]) -> ErrorCode:
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return mapper(error)


def validate_txn_offset_commit(group, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
    """ClassicGroup.validateOffsetCommit(isTransactional=true) (KIP-447): the member and generation are
    checked when the request names them; older versions (no member) commit to any group state."""
    if group.is_(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and group.is_(GroupState.EMPTY):
        return ErrorCode.NONE
    if generation_id >= 0 or member_id or group_instance_id is not None:
        if group_instance_id is not None and group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE
