"""The durable state of one share-partition as the share coordinator keeps it: what replaying its
ShareSnapshot / ShareUpdate records gives (Kafka's ShareCoordinatorShard.replay into a ShareGroupOffset),
and which of the two records a write becomes (ShareCoordinatorShard.generateShareStateRecord).

Kafka's snapshot rule, reproduced with its counter: the partition's first record is a snapshot
(kcoord writes it when the share-partition is initialized, as InitializeShareGroupState does); after
that a write is a ShareUpdate (only the changed batches) until the updates replayed since the last
snapshot reach `share.coordinator.snapshot.update.records.per.snapshot` (default 500), when the write
is a ShareSnapshot of the whole merged state at the next snapshot epoch. The counter counts as Kafka's
does: absent until the first update, which sets it to 0; each further update adds one; a snapshot
replayed while it is at the limit sets it back to 0.

Merging an update (PersisterStateBatchCombiner's outcome): its batches replace the state of the offsets
they cover, its start offset (unless -1) replaces the start offset, and offsets below the start offset
are dropped. Kept per offset here and written as maximal runs of one (state, delivery count).
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from kcoord.share import records as r

DEFAULT_SNAPSHOT_UPDATE_RECORDS = 500  # share.coordinator.snapshot.update.records.per.snapshot


def coalesce(states: Mapping[int, tuple[int, int]]) -> tuple[r.StateBatch, ...]:
    """Per-offset (state, delivery count) as the fewest state batches: runs of consecutive offsets with
    the same state and count, in offset order."""
    out: list[r.StateBatch] = []
    for offset in sorted(states):
        state, count = states[offset]
        if out and out[-1].last_offset == offset - 1 and out[-1][2:] == (state, count):
            out[-1] = out[-1]._replace(last_offset=offset)
        else:
            out.append(r.StateBatch(offset, offset, state, count))
    return tuple(out)


def expand(batches: Iterable[r.StateBatch], start_offset: int) -> dict[int, tuple[int, int]]:
    """State batches as per-offset (state, delivery count), offsets below `start_offset` left out."""
    out: dict[int, tuple[int, int]] = {}
    for b in batches:
        for offset in range(max(b.first_offset, start_offset), b.last_offset + 1):
            out[offset] = (b.delivery_state, b.delivery_count)
    return out


class DurableShareState:
    """One share-partition's state as its records say: changes only by `replay`."""

    def __init__(self, group_id: str, topic_id: uuid.UUID, partition: int,
                 snapshot_update_records: int = DEFAULT_SNAPSHOT_UPDATE_RECORDS) -> None:
        self.group_id, self.topic_id, self.partition = group_id, topic_id, partition
        self.snapshot_update_records = snapshot_update_records
        self.exists = False  # no record replayed yet: the share-partition is not initialized
        self.snapshot_epoch = 0
        self.state_epoch = 0
        self.leader_epoch = 0
        self.start_offset = -1
        self.delivery_complete_count = r.UNKNOWN_DELIVERY_COMPLETE_COUNT
        self.create_timestamp = 0
        self.write_timestamp = 0
        self.states: dict[int, tuple[int, int]] = {}  # offset >= start_offset -> (state, delivery count)
        self.updates_since_snapshot: int | None = None  # Kafka's snapshotUpdateCount for this key

    def state_batches(self) -> tuple[r.StateBatch, ...]:
        return coalesce(self.states)

    def summary(self) -> tuple:
        """What a reload must rebuild: epochs, start offset, per-offset states and the snapshot counter."""
        return (self.exists, self.snapshot_epoch, self.state_epoch, self.leader_epoch, self.start_offset,
                self.delivery_complete_count, self.create_timestamp, self.write_timestamp,
                tuple(sorted(self.states.items())), self.updates_since_snapshot)

    # ---------------------------------------------------------------- records out

    def initial_record(self, start_offset: int, state_epoch: int, leader_epoch: int,
                       now_ms: int) -> r.ShareStateRecord:
        """The snapshot that initializes the share-partition at `start_offset` (what Kafka's
        InitializeShareGroupState writes, with the start offset the leader computed from
        share.auto.offset.reset instead of -1 -- kcoord is both sides)."""
        return r.ShareStateRecord(r.SHARE_SNAPSHOT, self.group_id, self.topic_id, self.partition, 0,
                                  leader_epoch, start_offset, (), 0, state_epoch, now_ms, now_ms)

    def record_for(self, start_offset: int, changed: Mapping[int, tuple[int, int]], delivery_complete_count: int,
                   leader_epoch: int, now_ms: int) -> r.ShareStateRecord:
        """The record a write of `changed` offsets and `start_offset` becomes
        (ShareCoordinatorShard.generateShareStateRecord)."""
        if not self.exists:
            raise ValueError("write to an uninitialized share-partition")  # Kafka: KAFKA-19338
        if self.updates_since_snapshot is not None and self.updates_since_snapshot >= self.snapshot_update_records:
            merged = {o: s for o, s in self.states.items() if o >= start_offset}
            merged.update((o, s) for o, s in changed.items() if o >= start_offset)
            return r.ShareStateRecord(r.SHARE_SNAPSHOT, self.group_id, self.topic_id, self.partition,
                                      self.snapshot_epoch + 1, leader_epoch, start_offset, coalesce(merged),
                                      delivery_complete_count, self.state_epoch, now_ms, now_ms)
        return r.ShareStateRecord(r.SHARE_UPDATE, self.group_id, self.topic_id, self.partition,
                                  self.snapshot_epoch, leader_epoch, start_offset,
                                  coalesce({o: s for o, s in changed.items() if o >= start_offset}),
                                  delivery_complete_count)

    # ---------------------------------------------------------------- replay

    def replay(self, record: r.ShareStateRecord) -> None:
        self.leader_epoch = max(self.leader_epoch, record.leader_epoch) if self.exists else record.leader_epoch
        if record.type == r.SHARE_SNAPSHOT:
            self.exists = True
            self.snapshot_epoch = record.snapshot_epoch
            self.state_epoch = record.state_epoch
            self.start_offset = record.start_offset
            self.delivery_complete_count = record.delivery_complete_count
            self.create_timestamp, self.write_timestamp = record.create_timestamp, record.write_timestamp
            self.states = expand(record.state_batches, record.start_offset)
            if self.updates_since_snapshot is not None and \
                    self.updates_since_snapshot >= self.snapshot_update_records:
                self.updates_since_snapshot = 0
            return
        if not self.exists:
            # an update without its snapshot (a log cleaned of it): Kafka keeps the update as the state
            self.exists = True
            self.snapshot_epoch = record.snapshot_epoch
        if record.start_offset != -1:
            self.start_offset = record.start_offset
        self.delivery_complete_count = record.delivery_complete_count
        self.states.update(expand(record.state_batches, self.start_offset))
        if self.states and min(self.states) < self.start_offset:
            self.states = {o: s for o, s in self.states.items() if o >= self.start_offset}
        self.updates_since_snapshot = 0 if self.updates_since_snapshot is None else self.updates_since_snapshot + 1
