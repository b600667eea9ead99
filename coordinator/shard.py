"""GroupCoordinatorShard: the state of one `__consumer_offsets` partition, and the only way it changes.

A shard holds a GroupMetadataManager (classic groups) and an OffsetMetadataManager (committed offsets).
Handlers compute records and hand them to `write`; once the writer reports them durable, `replay`
applies them -- the same replay a load goes through -- and only then does the handler's continuation
answer the client. A failed append replays nothing, so it changes nothing.

`replay(key, value)` routes a record by its key's type (Kafka's GroupCoordinatorShard.replay):
OffsetCommitKey to the offset manager, GroupMetadataKey to the group manager, KIP-848's consumer group
records (key types 3-8) to the consumer group manager (kcoord.coordinator.consumer); other types (share
groups) are not ours yet and are skipped. A shard is the unit that loads (`load`, then
`on_loaded`) and unloads (`on_unloaded`), and later moves between nodes.
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable

from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.consumer import describe as consumer_describe
from kcoord.coordinator.consumer import records as consumer_records
from kcoord.coordinator.consumer.manager import ConsumerGroupManager
from kcoord.coordinator.consumer.topics_image import NO_TOPICS, TopicsImage
from kcoord.coordinator.core import OFFSETS_TOPIC, map_write_error
from kcoord.coordinator.events import CoordinatorEvents
from kcoord.coordinator.group_manager import GroupMetadataManager
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.offset_manager import OffsetMetadataManager
from kcoord.coordinator.partition_state import PartitionState
from kcoord.coordinator.records import (
    OffsetCommitRecords,
    Record,
    group_metadata_tombstone,
    offset_commit_tombstone,
)
from kcoord.coordinator.timers import Clock, Timer
from kcoord.coordinator.txn_offsets import TxnMarkerRecords
from kcoord.protocol.consumer_offsets import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from kcoord.protocol.errors import ErrorCode

S = GroupState
TopicPartition = tuple[str, int]


class GroupCoordinatorShard:
    def __init__(self, partition: int, config: GroupConfig, clock: Clock, timer: Timer, writer,
                 log: logging.Logger, events: CoordinatorEvents, topics: TopicsImage = NO_TOPICS) -> None:
        self.partition = partition
        self.config = config
        self.clock = clock
        self.timer = timer
        self.writer = writer
        self.log = log
        self.groups = GroupMetadataManager(f"{OFFSETS_TOPIC}-{partition}", config, clock, timer, log, events,
                                           self.write)
        self.offsets = OffsetMetadataManager(self.groups)
        self.consumer = ConsumerGroupManager(f"{OFFSETS_TOPIC}-{partition}", config, clock, timer, log, events,
                                             self.write, topics)
        # one namespace of group ids: a classic group and a consumer group never share one
        self.consumer.classic = self.groups  # online migration reads and hands over classic groups
        self.groups.is_consumer_group = self.consumer.groups.__contains__
        self.offsets.consumer_groups = self.consumer.groups
        self._append_seq = itertools.count()

    # ------------------------------------------------------------ records out ...

    def write(self, records: list[Record], then: Callable[[ErrorCode], None]) -> None:
        """Append `records`; once durable replay them, then `then(NONE)`. On failure `then(error)` and
        nothing is replayed. `then` runs exactly once: with REQUEST_TIMED_OUT if the writer did not answer
        within offsets.commit.timeout.ms (Kafka's append timeout); a late answer then changes nothing."""
        key = ("append", self.partition, next(self._append_seq))
        done = False

        def finish(error: ErrorCode) -> None:
            nonlocal done
            if done:
                return
            done = True
            self.timer.cancel(key)
            if error == ErrorCode.NONE:
                self.replay_records(records)
            then(error)

        def timed_out() -> None:
            if not done:
                self.log.warning("Append of %d records to %s-%d timed out after %d ms", len(records), OFFSETS_TOPIC,
                                 self.partition, self.config.offsets_commit_timeout_ms)
            finish(ErrorCode.REQUEST_TIMED_OUT)

        self.timer.schedule(key, self.config.offsets_commit_timeout_ms, timed_out)
        self.writer.append(self.partition, records, finish)

    # ------------------------------------------------------------ ... replay in

    def replay_records(self, records: Iterable[Record]) -> None:
        replay_into = getattr(records, "replay_into", None)
        if replay_into is not None:  # transactional offsets and markers (kcoord.coordinator.txn_offsets)
            replay_into(self)
            return
        if isinstance(records, OffsetCommitRecords):  # a commit: its typed values, no decoding
            self.offsets.replay_offsets(records.group_id, records.values)
            return
        for record in records:
            decoded = getattr(record, "decoded", None)
            if decoded is not None:  # a consumer group record we wrote: its decoded form, no decoding
                self.replay_consumer(decoded)
            else:
                self.replay(record[0], record[1])

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of this partition, as read from the log."""
        k = decode_key(key)
        if isinstance(k, OffsetCommitKey):
            self.offsets.replay_offsets(k.group, {(k.topic, k.partition): None if value is None
                                                  else decode_offset_commit_value(value)})
        elif isinstance(k, GroupMetadataKey):
            if value is not None and k.group in self.consumer.groups:
                # the consumer group holds the id (a load skips it the same way; ConsumerGroupManager.stale_classic)
                self.log.info("Ignoring classic metadata of group %s: it is a consumer group", k.group)
                self.consumer.stale_classic.add(k.group)
                return
            self.consumer.stale_classic.discard(k.group)
            self.groups.replay_group_metadata(k.group, None if value is None else decode_group_metadata_value(value))
        elif (rtype := consumer_records.record_type(key)) is not None:
            self.consumer.replay(key, value)
            if rtype == consumer_records.GROUP_METADATA and value is not None:
                self.groups.drop_upgraded(consumer_records.decode(key, None).group_id)

    def replay_consumer(self, record: consumer_records.ConsumerRecord) -> None:
        """A KIP-848 consumer group record we wrote, as `replay` of its bytes would decode it."""
        self.consumer.replay_record(record)
        if record.type == consumer_records.GROUP_METADATA and record.value is not None:
            self.groups.drop_upgraded(record.group_id)

    # ------------------------------------------------------------ loading and unloading

    def load(self, state: PartitionState, keep_state: bool = False, group_ids: Iterable[str] | None = None) -> int:
        """Replay a partition's materialised state (kcoord.coordinator.partition_state: what replaying its log,
        record by record, leaves; a checkpoint's state plus the log's tail): every group, or those of
        `group_ids` (a load in slices: `load_consumer_groups` first). The offset tables are taken over
        unless `keep_state` (the caller still needs them): then they are copied. Returns the number of
        groups loaded so far."""
        if group_ids is None:
            self.load_consumer_groups(state)
        for group_id in (sorted(state.groups()) if group_ids is None else group_ids):
            state.decode(group_id)
            value = state.metadata.get(group_id)
            if value is not None and group_id in self.consumer.groups:  # as replay ignores it
                self.consumer.stale_classic.add(group_id)
            elif value is not None:
                self.groups.replay_group_metadata(group_id, decode_group_metadata_value(value))
            offsets = state.offsets.get(group_id)
            if offsets:
                if keep_state:
                    self.offsets.replay_offsets(group_id, offsets)
                else:  # what that replay leaves in a fresh shard, without the copy
                    self.offsets.offsets[group_id] = offsets
                    self.groups.ensure_group(group_id)
        while state.transactional:  # transactions without a marker yet (once, whatever the slices)
            self.offsets.transactional.replay_records(*state.transactional.popitem())
        return len(self.groups.groups)

    def load_consumer_groups(self, state: PartitionState) -> None:
        """The partition's consumer group records (KIP-848), before its classic groups and offsets: offsets
        of a consumer group then make no classic group of the same id."""
        self.consumer.load(state.consumer_records)

    def on_loaded(self) -> None:
        self.groups.on_loaded()
        self.consumer.on_loaded()

    def on_unloaded(self) -> int:
        return self.groups.on_unloaded() + self.consumer.on_unloaded()

    # ------------------------------------------------------------ operations over both managers

    def delete_groups(self, group_ids: list[str], callback: Callable[[dict[str, ErrorCode]], None]) -> None:
        """Empty groups only: their offsets' tombstones and the group's, written together; the groups
        are gone once those are durable (Kafka's GroupCoordinatorShard.deleteGroups)."""
        results: dict[str, ErrorCode] = {}
        records: list[Record] = []
        for group_id in group_ids:
            consumer_group = self.consumer.groups.get(group_id)
            if consumer_group is not None:  # KIP-848: Empty only (and no write in flight), its records' tombstones
                error = results[group_id] = (ErrorCode.NON_EMPTY_GROUP if self.consumer.busy(group_id)
                                             else consumer_describe.validate_delete_group(consumer_group))
                if error == ErrorCode.NONE:
                    records += self.offsets.delete_all_offsets(group_id) + self.consumer.deletion_records(consumer_group)
                continue
            error = self.groups.validate_delete_group(group_id)
            results[group_id] = error
            if error == ErrorCode.NONE:
                records += self.offsets.delete_all_offsets(group_id)
                records.append(group_metadata_tombstone(group_id))
        if not records:
            callback(results)
            return
        deleted = [g for g, e in results.items() if e == ErrorCode.NONE]

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:
                for group_id in deleted:
                    self.log.info("Group %s deleted", group_id)
                    self.groups.events.group_members(group_id, 0)
            else:
                for group_id in deleted:
                    results[group_id] = map_write_error(error)
            callback(results)

        self.write(records, written)

    def complete_transaction(self, producer_id: int, producer_epoch: int, commit: bool,
                             then: Callable[[ErrorCode], None]) -> None:
        """The transaction coordinator's marker for this partition (GroupCoordinatorShard.replayEndTransactionMarker
        once durable): the producer's pending offsets are applied (COMMIT) or dropped (ABORT)."""
        self.write(TxnMarkerRecords(producer_id, producer_epoch, commit), lambda error: then(map_write_error(error)))

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                       callback: Callable[[tuple[ErrorCode, dict[TopicPartition, ErrorCode]]], None]) -> None:
        error, results, records = self.offsets.delete_offsets(group_id, partitions)
        if error != ErrorCode.NONE or not records:
            callback((error, results))
            return
        self.log.info("Deleting %d offsets of group %s", len(records), group_id)
        self.write(records, lambda err: callback((map_write_error(err), results)))

    def cleanup_group_metadata(self) -> int:
        """Expire offsets (KIP-211) and delete groups left Empty without offsets; returns records written.
        Nothing changes until the tombstones are durable."""
        now = self.clock.now_ms()
        records: list[Record] = []
        for group in list(self.groups.groups.values()):
            tps = self.offsets.expired_offsets(group, now)
            records += [offset_commit_tombstone(group.group_id, t, p) for t, p in tps]
            if tps:
                self.log.info("Expiring %d offsets of group %s", len(tps), group.group_id)
            left = len(self.offsets.committed(group.group_id)) - len(tps)
            if group.is_(S.EMPTY) and left == 0 and group.group_id not in self.offsets.pending \
                    and not self.offsets.transactional.has_group(group.group_id):
                records.append(group_metadata_tombstone(group.group_id))
                self.log.info("Group %s expires in generation %d (no members, no offsets)", group.group_id,
                              group.generation_id)
        records += self._cleanup_consumer_groups(now)
        if records:
            self.write(records, self._log_write_error)
        return len(records)

    def _cleanup_consumer_groups(self, now: int) -> list[Record]:
        """Consumer groups (KIP-848): expired offsets, then an Empty group left without offsets goes
        (GroupMetadataManager.maybeDeleteGroup)."""
        records: list[Record] = []
        for group in list(self.consumer.groups.values()):
            gid = group.group_id
            subscribed = set().union(*(self.consumer.heartbeats.topics_of(group, m) for m in group.members.values()))
            tps = consumer_describe.expired_offsets(group, self.offsets.committed(gid), self.offsets.pending.get(gid, {}),
                                                    subscribed, now, self.config.offsets_retention_ms)
            records += [offset_commit_tombstone(gid, t, p) for t, p in tps]
            if tps:
                self.log.info("Expiring %d offsets of consumer group %s", len(tps), gid)
            left = len(self.offsets.committed(gid)) - len(tps)
            if group.is_empty() and left == 0 and gid not in self.offsets.pending and not self.consumer.busy(gid):
                records += self.consumer.deletion_records(group)
                self.log.info("Consumer group %s expires in epoch %d (no members, no offsets)", gid, group.group_epoch)
        return records

    def handle_topics_deleted(self, topics: set[str]) -> int:
        records = self.offsets.topics_deleted(topics)
        if records:
            self.log.info("Removing %d offsets of deleted topics %s", len(records), sorted(topics))
            self.write(records, self._log_write_error)
        return len(records)

    def _log_write_error(self, error: ErrorCode) -> None:
        if error != ErrorCode.NONE:
            self.log.warning("Writing tombstones to %s-%d failed: %s", OFFSETS_TOPIC, self.partition, error.name)
