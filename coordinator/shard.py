"""GroupCoordinatorShard: the state of one `__consumer_offsets` partition, and the only way it changes.

A shard holds a GroupMetadataManager (classic groups) and an OffsetMetadataManager (committed offsets).
Handlers compute records and hand them to `write`; once the writer reports them durable, `replay`
applies them -- the same replay a load goes through -- and only then does the handler's continuation
answer the client. A failed append replays nothing, so it changes nothing.

`replay(key, value)` routes a record by its key's type (Kafka's GroupCoordinatorShard.replay):
OffsetCommitKey to the offset manager, GroupMetadataKey to the group manager, KIP-848's consumer group
records (key types 3-8) to the consumer group manager (kcoord.coordinator.consumer), KIP-932's (10-14) to
the share group manager (kcoord.coordinator.share; its operations: share/shard_ops.py). A shard is the unit
that loads (`load`, then `on_loaded`) and unloads (`on_unloaded`), and later moves between nodes.
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable

from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.consumer import describe as consumer_describe
from kcoord.coordinator.consumer import records as consumer_records
from kcoord.coordinator.consumer.classic_members import CLASSIC_GROUP, PendingHeartbeat
from kcoord.coordinator.consumer.describe import DescribedConsumerGroup
from kcoord.coordinator.consumer.manager import ConsumerGroupManager
from kcoord.coordinator.consumer.offsets import validate_offset_fetch
from kcoord.coordinator.consumer.topics_image import NO_TOPICS, TopicsImage
from kcoord.coordinator.core import OFFSETS_TOPIC, map_write_error
from kcoord.coordinator.events import CoordinatorEvents
from kcoord.coordinator.group_manager import GroupMetadataManager
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.join_request import JoinRequest
from kcoord.coordinator.offset_manager import OffsetMetadataManager
from kcoord.coordinator.partition_state import PartitionState
from kcoord.coordinator.records import (
    OffsetCommitRecords,
    Record,
    group_metadata_tombstone,
    offset_commit_tombstone,
)
from kcoord.coordinator.results import (
    DescribedGroup,
    JoinGroupResult,
    LeaveGroupResult,
    ListedGroup,
    OffsetCommit,
    OffsetFetchResult,
    SyncGroupResult,
)
from kcoord.coordinator.share.shard_ops import ShareGroupOperations
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


class GroupCoordinatorShard(ShareGroupOperations):
    def __init__(self, partition: int, config: GroupConfig, clock: Clock, timer: Timer, writer,
                 log: logging.Logger, events: CoordinatorEvents, topics: TopicsImage = NO_TOPICS) -> None:
        self.partition = partition
        self.config = config
        self.clock = clock
        self.timer = timer
        self.writer = writer
        self.log = log
        self.group_manager = GroupMetadataManager(f"{OFFSETS_TOPIC}-{partition}", config, clock, timer, log, events,
                                           self.write)
        self.offset_manager = OffsetMetadataManager(self.group_manager)
        self.consumer_manager = ConsumerGroupManager(f"{OFFSETS_TOPIC}-{partition}", config, clock, timer, log, events,
                                             self.write, topics)
        # one namespace of group ids: a classic group and a consumer group never share one
        self.consumer_manager.group_manager = self.group_manager  # online migration reads and hands over classic groups
        self.group_manager.is_consumer_group = self.consumer_manager.groups.__contains__
        self.offset_manager.consumer_groups = self.consumer_manager.groups
        self._append_seq = itertools.count()
        # share groups (KIP-932), and ConsumerGroupHeartbeat bound to the consumer step itself (the hot path: no
        # frame of the shard's own) until a share group exists (share/shard_ops.py: group-type exclusivity)
        self._init_share_groups(partition, config, clock, timer, log, events, self.write, topics)

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
            self.offset_manager.replay_offsets(records.group_id, records.values)
            return
        for record in records:
            decoded = getattr(record, "decoded", None)
            if decoded is not None:  # a group record we wrote (KIP-848, KIP-932): its decoded form, no decoding
                self.replay_decoded(decoded)
            else:
                self.replay(record[0], record[1])

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of this partition, as read from the log."""
        k = decode_key(key)
        if isinstance(k, OffsetCommitKey):
            self.offset_manager.replay_offsets(k.group, {(k.topic, k.partition): None if value is None
                                                  else decode_offset_commit_value(value)})
        elif isinstance(k, GroupMetadataKey):
            if value is not None and k.group in self.consumer_manager.groups:
                # the consumer group holds the id (a load skips it the same way; ConsumerGroupManager.stale_classic)
                self.log.info("Ignoring classic metadata of group %s: it is a consumer group", k.group)
                self.consumer_manager.stale_classic.add(k.group)
                return
            self.consumer_manager.stale_classic.discard(k.group)
            self.group_manager.replay_group_metadata(k.group, None if value is None else decode_group_metadata_value(value))
        elif (rtype := consumer_records.record_type(key)) is not None:
            self.consumer_manager.replay(key, value)
            if rtype == consumer_records.GROUP_METADATA and value is not None:
                self.group_manager.drop_upgraded(consumer_records.decode(key, None).group_id)
        else:  # KIP-932's share group records; others belong to other coordinators
            self.replay_share(key, value)

    def replay_consumer(self, record: consumer_records.ConsumerRecord) -> None:
        """A KIP-848 consumer group record we wrote, as `replay` of its bytes would decode it."""
        self.consumer_manager.replay_record(record)
        if record.type == consumer_records.GROUP_METADATA and record.value is not None:
            self.group_manager.drop_upgraded(record.group_id)

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
            if value is not None and group_id in self.consumer_manager.groups:  # as replay ignores it
                self.consumer_manager.stale_classic.add(group_id)
            elif value is not None:
                self.group_manager.replay_group_metadata(group_id, decode_group_metadata_value(value))
            offsets = state.offsets.get(group_id)
            if offsets:
                if keep_state:
                    self.offset_manager.replay_offsets(group_id, offsets)
                else:  # what that replay leaves in a fresh shard, without the copy
                    self.offset_manager.offsets[group_id] = offsets
                    self.group_manager.ensure_group(group_id)
        while state.transactional:  # transactions without a marker yet (once, whatever the slices)
            self.offset_manager.transactional.replay_records(*state.transactional.popitem())
        return self.classic_group_count()

    def load_consumer_groups(self, state: PartitionState) -> None:
        """The partition's consumer group records (KIP-848), before its classic groups and offsets: offsets
        of a consumer group then make no classic group of the same id."""
        self.consumer_manager.load(self._split_share_records(state.consumer_records))

    def on_loaded(self) -> None:
        self.group_manager.on_loaded()
        self.consumer_manager.on_loaded()
        self.share_manager.on_loaded()

    def on_unloaded(self) -> int:
        return self.group_manager.on_unloaded() + self.consumer_manager.on_unloaded() + self.share_manager.on_unloaded()

    # ------------------------------------------------------------ the operations the service calls

    # Kafka's GroupCoordinatorShard names them (joinGroup, syncGroup, ...). The service has decided the group is
    # served here; the shard picks the side: a classic request goes to the consumer side when the id holds a
    # consumer group or a write of one is in flight (e.g. an upgrade) -- it then runs once that is durable, and
    # falls back to the classic side if the id holds no consumer group any more (CLASSIC_GROUP).

    def _consumer_side(self, group_id: str) -> bool:
        consumer = self.consumer_manager
        return group_id in consumer.groups or consumer.busy(group_id)

    def join_group(self, join: JoinRequest, callback: Callable[[JoinGroupResult], None]) -> None:
        """JoinGroup (classicGroupJoin, or classicGroupJoinToConsumerGroup for a consumer group)."""
        joins = self.group_manager.joins
        if join.group_id in self.share_manager.groups:  # classicGroupJoin: a group of another type
            return callback(JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
        if not self._consumer_side(join.group_id):
            return joins.handle_join_group(join, callback)
        self.consumer_manager.classic_members.join(join, lambda result: joins.handle_join_group(
            join, callback) if result is CLASSIC_GROUP else callback(result))

    def sync_group(self, request, version: int, callback: Callable[[SyncGroupResult], None]) -> None:
        """SyncGroup (classicGroupSync, or classicGroupSyncToConsumerGroup)."""
        syncs = self.group_manager.syncs
        if not self._consumer_side(request.group_id):
            return syncs.handle_sync_group(request, version, callback)
        self.consumer_manager.classic_members.sync(request, version, lambda result: syncs.handle_sync_group(
            request, version, callback) if result is CLASSIC_GROUP else callback(result))

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode | PendingHeartbeat:
        """Heartbeat (classicGroupHeartbeat, or classicGroupHeartbeatToConsumerGroup: see
        ClassicMembers.heartbeat_or_pending)."""
        classic = self.group_manager.membership
        consumer = self.consumer_manager
        if group_id in consumer.groups or consumer.busy(group_id):  # a consumer group's classic member (migration)
            return consumer.classic_members.heartbeat_or_pending(group_id, member_id, group_instance_id, generation_id,
                                                                 classic.heartbeat)
        return classic.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]],
                    callback: Callable[[LeaveGroupResult], None]) -> LeaveGroupResult | None:
        """LeaveGroup (classicGroupLeave, or classicGroupLeaveToConsumerGroup): a classic group's answer is
        returned; a consumer group's goes to `callback` once its members' removal is durable (None returned)."""
        membership = self.group_manager.membership
        if not self._consumer_side(group_id):
            return membership.handle_leave_group(group_id, members)
        self.consumer_manager.classic_members.leave(group_id, members, lambda result: callback(
            membership.handle_leave_group(group_id, members) if result is CLASSIC_GROUP else result))
        return None

    def consumer_group_describe(self, group_id: str, default_assignor: str) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of one group (Kafka's consumerGroupDescribe, per id): GROUP_ID_NOT_FOUND for
        an unknown or classic group."""
        group = self.consumer_manager.groups.get(group_id)
        if group is None:
            return DescribedConsumerGroup(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message=f"Group {group_id} not found.")
        return consumer_describe.describe(group, self.consumer_manager.topics, default_assignor)

    def describe_group(self, group_id: str, request_version: int) -> DescribedGroup:
        """DescribeGroups of one group (Kafka's describeGroups, per id); a consumer group is not a classic one."""
        if group_id in self.consumer_manager.groups or group_id in self.share_manager.groups:
            return consumer_describe.not_a_classic_group(group_id, request_version)
        return self.group_manager.describe_group(group_id, request_version)

    def list_groups(self, states: list[str] | None) -> list[ListedGroup]:
        """ListGroups: the classic groups, then the consumer groups, in the `states` asked (any if None)."""
        wanted = {s.lower() for s in states} if states else None
        return self.group_manager.list_groups(states) + [
            ListedGroup(g.group_id, g.protocol_type, g.state, "consumer")
            for g in self.consumer_manager.groups.values() if wanted is None or g.state.lower() in wanted
        ] + self._listed_share_groups(wanted)

    def commit_offset(self, request: OffsetCommit, callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        """OffsetCommit."""
        self.offset_manager.handle_commit_offsets(request, callback)

    def commit_transactional_offset(self, request: OffsetCommit, producer_id: int, producer_epoch: int,
                                    callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        """TxnOffsetCommit: pending offsets of the producer's transaction."""
        self.offset_manager.handle_txn_commit_offsets(request, producer_id, producer_epoch, callback)

    def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None, require_stable: bool,
                      member_id: str | None, member_epoch: int) -> OffsetFetchResult:
        """OffsetFetch (Kafka's fetchOffsets / fetchAllOffsets: `partitions` None). A member (v9) of a consumer
        group must be in its current epoch (ConsumerGroup.validateOffsetFetch)."""
        consumer_group = self.consumer_manager.groups.get(group_id)
        if consumer_group is not None:
            error = validate_offset_fetch(consumer_group, member_id, member_epoch)
            if error != ErrorCode.NONE:
                return OffsetFetchResult(group_id, error)
        return self.offset_manager.handle_fetch_offsets(group_id, partitions, require_stable)

    def classic_group_count(self) -> int:
        """How many classic groups the shard holds (what a load reports)."""
        return len(self.group_manager.groups)

    # ------------------------------------------------------------ operations over both managers

    def delete_groups(self, group_ids: list[str], callback: Callable[[dict[str, ErrorCode]], None]) -> None:
        """Empty groups only: their offsets' tombstones and the group's, written together; the groups
        are gone once those are durable (Kafka's GroupCoordinatorShard.deleteGroups)."""
        results: dict[str, ErrorCode] = {}
        records: list[Record] = []
        for group_id in (g for g in group_ids if not self._delete_share_group(g, results, records)):  # KIP-932's first
            consumer_group = self.consumer_manager.groups.get(group_id)
            if consumer_group is not None:  # KIP-848: Empty only (and no write in flight), its records' tombstones
                error = results[group_id] = (ErrorCode.NON_EMPTY_GROUP if self.consumer_manager.busy(group_id)
                                             else consumer_describe.validate_delete_group(consumer_group))
                if error == ErrorCode.NONE:
                    records += self.offset_manager.delete_all_offsets(group_id) + self.consumer_manager.deletion_records(consumer_group)
                continue
            error = self.group_manager.validate_delete_group(group_id)
            results[group_id] = error
            if error == ErrorCode.NONE:
                records += self.offset_manager.delete_all_offsets(group_id)
                records.append(group_metadata_tombstone(group_id))
        if not records:
            callback(results)
            return
        deleted = [g for g, e in results.items() if e == ErrorCode.NONE]

        def written(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:
                for group_id in deleted:
                    self.log.info("Group %s deleted", group_id)
                    self.group_manager.events.group_members(group_id, 0)
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
        error, results, records = self.offset_manager.delete_offsets(group_id, partitions)
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
        for group in list(self.group_manager.groups.values()):
            tps = self.offset_manager.expired_offsets(group, now)
            records += [offset_commit_tombstone(group.group_id, t, p) for t, p in tps]
            if tps:
                self.log.info("Expiring %d offsets of group %s", len(tps), group.group_id)
            left = len(self.offset_manager.committed(group.group_id)) - len(tps)
            if group.is_(S.EMPTY) and left == 0 and group.group_id not in self.offset_manager.pending \
                    and not self.offset_manager.transactional.has_group(group.group_id):
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
        for group in list(self.consumer_manager.groups.values()):
            gid = group.group_id
            subscribed = set().union(*(self.consumer_manager.heartbeats.topics_of(group, m) for m in group.members.values()))
            tps = consumer_describe.expired_offsets(group, self.offset_manager.committed(gid), self.offset_manager.pending.get(gid, {}),
                                                    subscribed, now, self.config.offsets_retention_ms)
            records += [offset_commit_tombstone(gid, t, p) for t, p in tps]
            if tps:
                self.log.info("Expiring %d offsets of consumer group %s", len(tps), gid)
            left = len(self.offset_manager.committed(gid)) - len(tps)
            if group.is_empty() and left == 0 and gid not in self.offset_manager.pending and not self.consumer_manager.busy(gid):
                records += self.consumer_manager.deletion_records(group)
                self.log.info("Consumer group %s expires in epoch %d (no members, no offsets)", gid, group.group_epoch)
        return records

    def handle_topics_deleted(self, topics: set[str]) -> int:
        records = self.offset_manager.topics_deleted(topics)
        if records:
            self.log.info("Removing %d offsets of deleted topics %s", len(records), sorted(topics))
            self.write(records, self._log_write_error)
        return len(records)

    def _log_write_error(self, error: ErrorCode) -> None:
        if error != ErrorCode.NONE:
            self.log.warning("Writing tombstones to %s-%d failed: %s", OFFSETS_TOPIC, self.partition, error.name)
