"""GroupCoordinatorService: the coordinator's one front door (Kafka 4's GroupCoordinatorService).

Every group request enters here. The service checks that it is active, that the group id is usable,
and that this node holds the group's shard (the `__consumer_offsets` partition) loaded; then it hands
the request to the shard. The checks and what each API answers when one fails, as Kafka 4 maps them
(GroupCoordinatorService and CoordinatorOperationExceptionHelper.handleOperationException):

| API            | not active          | group id            | shard loading                   | not owned        |
|----------------|---------------------|---------------------|---------------------------------|------------------|
| JoinGroup      | COORDINATOR_NOT_AV. | "" → INVALID_GROUP_ID, then the session timeout's bounds (INVALID_SESSION_TIMEOUT) | LOAD_IN_PROGRESS | NOT_COORDINATOR |
| SyncGroup      | COORDINATOR_NOT_AV. | "" → INVALID_GROUP_ID | LOAD_IN_PROGRESS              | NOT_COORDINATOR  |
| Heartbeat      | COORDINATOR_NOT_AV. | "" → INVALID_GROUP_ID | NONE ("still loading, so blindly respond") | NOT_COORDINATOR |
| LeaveGroup     | COORDINATOR_NOT_AV. | "" → INVALID_GROUP_ID | LOAD_IN_PROGRESS (top level)  | NOT_COORDINATOR  |
| OffsetCommit   | every partition     | null → INVALID_GROUP_ID | every partition             | every partition  |
| OffsetFetch    | group level         | null → INVALID_GROUP_ID | group level                 | group level      |
| DescribeGroups | per group           | null → INVALID_GROUP_ID | per group, empty fields     | per group        |
| ListGroups     | top level           | -                   | top level, no groups (any shard) | shard skipped   |
| DeleteGroups   | per group           | null → INVALID_GROUP_ID | per group                   | per group        |
| OffsetDelete   | top level           | "" → INVALID_GROUP_ID | top level                     | top level        |
| ConsumerGroupHeartbeat | top level   | "" → INVALID_REQUEST (in the shard) | top level        | top level        |
| ConsumerGroupDescribe  | per group   | "" → INVALID_GROUP_ID | per group                     | per group        |
| ShareGroupHeartbeat    | top level   | "" → INVALID_REQUEST (in the manager) | top level      | top level        |
| ShareGroupDescribe     | per group   | "" → INVALID_GROUP_ID | per group                     | per group        |

(`""` checks are Kafka's isGroupIdNotEmpty; "null" ones accept "" for backwards compatibility.) A shard
that failed to load is not owned. Where the answer is an error, the API's handler in broker/apis puts
it where its version carries errors.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.consumer.classic_members import PendingHeartbeat
from kcoord.coordinator.consumer.describe import DescribedConsumerGroup
from kcoord.coordinator.consumer.steady import HeartbeatResult
from kcoord.coordinator.consumer.topics_image import NO_TOPICS, TopicsImage
from kcoord.coordinator.core import LOGGER_NAME, OFFSETS_TOPIC, RecordWriter
from kcoord.coordinator.elections import ShardElections
from kcoord.coordinator.events import NO_EVENTS, CoordinatorEvents
from kcoord.coordinator.join_request import JoinRequest
from kcoord.coordinator.membership import leave_members
from kcoord.coordinator.partition_state import PartitionState
from kcoord.coordinator.results import (
    DescribedGroup,
    JoinGroupResult,
    LeaveGroupResult,
    ListedGroup,
    OffsetCommit,
    OffsetFetchResult,
    RequestContext,
    SyncGroupResult,
)
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.coordinator.share.heartbeat import ShareHeartbeatResult
from kcoord.coordinator.share.share_group import ShareGroup
from kcoord.coordinator.timers import Clock, Timer, TimerQueue
from kcoord.protocol.consumer_offsets import partition_for
from kcoord.protocol.errors import ErrorCode

E = ErrorCode
RETENTION_TIMER_KEY = ("offsets-retention",)
TopicPartition = tuple[str, int]


class GroupCoordinatorService(ShardElections):
    def __init__(self, config: GroupConfig | None = None, *, clock: Clock, timer: Timer | None = None,
                 writer: RecordWriter, log: logging.Logger | None = None,
                 events: CoordinatorEvents = NO_EVENTS, owned_partitions: set[int] | None = None,
                 topics: TopicsImage = NO_TOPICS) -> None:
        self.config = config or GroupConfig()
        self.topics = topics  # the cluster's topics, as consumer groups (KIP-848) subscribe by name
        self.clock = clock
        self.timer = timer if timer is not None else TimerQueue(clock)
        self.writer = writer
        self.log = log or logging.getLogger(LOGGER_NAME)
        self.events = events
        self.active = True
        self.shards: dict[int, GroupCoordinatorShard] = {}   # loaded and serving
        self.loading: dict[int, GroupCoordinatorShard] = {}  # being loaded: their groups wait
        # None: this node owns every partition (one node; a shard is made live on first use); else those.
        self.owned_partitions = owned_partitions
        self._partition_cache: dict[str, int] = {}
        self.epochs: dict[int, int] = {}  # cluster mode: the epoch each shard was elected at (ShardElections)
        self.schedule_offset_expiration()

    # ------------------------------------------------------------ routing

    def partition_for(self, group_id: str) -> int:
        p = self._partition_cache.get(group_id)
        if p is None:
            if len(self._partition_cache) > 100_000:
                self._partition_cache.clear()
            p = self._partition_cache[group_id] = partition_for(group_id, self.config.offsets_topic_num_partitions)
        return p

    def _shard_or_error(self, group_id: str | None, allow_empty: bool = False) -> GroupCoordinatorShard | ErrorCode:
        """The front door's checks in Kafka's order: active, then the group id, then the shard."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        if group_id is None or (group_id == "" and not allow_empty):
            return E.INVALID_GROUP_ID
        return self.shard_for(group_id)

    def shard_for(self, group_id: str) -> GroupCoordinatorShard | ErrorCode:
        """The live shard holding `group_id`, or the error that replaces it (COORDINATOR_NOT_AVAILABLE,
        COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR)."""
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        shard = self.shards.get(partition)
        if shard is not None:
            return shard
        if partition in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if self.owned_partitions is not None:
            return E.NOT_COORDINATOR
        shard = self.shards[partition] = self._new_shard(partition)
        shard.on_loaded()
        return shard

    def _new_shard(self, partition: int) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(partition, self.config, self.clock, self.timer, self.writer, self.log,
                                     self.events, self.topics)

    # ------------------------------------------------------------ JoinGroup, SyncGroup, Heartbeat, LeaveGroup

    def join_group(self, context: RequestContext, request, callback: Callable[[JoinGroupResult], None]) -> None:
        if not self.active:
            return callback(JoinGroupResult(E.COORDINATOR_NOT_AVAILABLE, request.member_id))
        if not request.group_id:
            return callback(JoinGroupResult(E.INVALID_GROUP_ID, request.member_id))
        if not (self.config.group_min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return callback(JoinGroupResult(E.INVALID_SESSION_TIMEOUT, request.member_id))
        shard = self.shard_for(request.group_id)
        if isinstance(shard, ErrorCode):
            return callback(JoinGroupResult(shard))
        shard.join_group(JoinRequest.of(context, request), callback)

    def consumer_group_heartbeat(self, context: RequestContext, request,
                                 callback: Callable[[HeartbeatResult], None]) -> None:
        """KIP-848's heartbeat (kcoord.coordinator.consumer.heartbeat); the group id is validated by the shard."""
        if not self.active:
            return callback(HeartbeatResult(E.COORDINATOR_NOT_AVAILABLE))
        shard = self.shard_for(request.group_id or "")
        if isinstance(shard, ErrorCode):
            return callback(HeartbeatResult(shard))
        shard.consumer_group_heartbeat(context, request, callback)

    def steady_consumer_heartbeat(self, group_id: str, member_id: str, member_epoch: int, client_id: str,
                                  client_host: str) -> int | None:
        """A steady ConsumerGroupHeartbeat answered from its fields (the frame fast path): the heartbeat
        interval to answer with (ConsumerGroupHeartbeat.steady), or None: take consumer_group_heartbeat
        (which also answers every error: not active, no shard here, not loaded, not led)."""
        # shard_for's answer when the group's shard is live here, without its calls; else shard_for
        shard = self.shards.get(self._partition_cache.get(group_id, -1)) if self.active else None
        shard = shard or self.shard_for(group_id)
        if shard.__class__ is ErrorCode:
            return None
        return shard.steady_consumer_heartbeat(group_id, member_id, member_epoch, client_id, client_host)  # pyright: ignore[reportAttributeAccessIssue]  (not an ErrorCode: the shard)

    def share_group_heartbeat(self, context: RequestContext, request,
                              callback: Callable[[ShareHeartbeatResult], None]) -> None:
        """KIP-932's heartbeat (kcoord.coordinator.share.heartbeat); the group id is validated by the manager."""
        if not self.active:
            return callback(ShareHeartbeatResult(E.COORDINATOR_NOT_AVAILABLE))
        if not request.group_id:
            return callback(ShareHeartbeatResult(E.INVALID_REQUEST, "GroupId can't be empty."))
        shard = self.shard_for(request.group_id)
        if isinstance(shard, ErrorCode):
            return callback(ShareHeartbeatResult(shard))
        shard.share_group_heartbeat(context, request, callback)

    def share_group_describe(self, group_ids: Iterable[str | None]) -> list[tuple[str | None, ErrorCode, str | None, ShareGroup | None]]:
        """ShareGroupDescribe (77): per group (id, error, message, the group or None)."""
        out: list[tuple[str | None, ErrorCode, str | None, ShareGroup | None]] = []
        for group_id in group_ids:
            shard = self._shard_or_error(group_id)
            if isinstance(shard, ErrorCode):
                out.append((group_id, shard, None, None))
                continue
            out.append((group_id, *shard.share_group_describe(group_id)))
        return out

    def sync_group(self, context: RequestContext, request, callback: Callable[[SyncGroupResult], None]) -> None:
        shard = self._shard_or_error(request.group_id)
        if isinstance(shard, ErrorCode):
            return callback(SyncGroupResult(shard))
        shard.sync_group(request, context.api_version, callback)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode | PendingHeartbeat:
        """Fields: the frame fast path calls this for every heartbeat (see GroupCoordinatorShard.heartbeat)."""
        if not group_id:
            return E.INVALID_GROUP_ID if self.active else E.COORDINATOR_NOT_AVAILABLE
        shard = self.shard_for(group_id)
        if shard.__class__ is ErrorCode:
            return E.NONE if shard is E.COORDINATOR_LOAD_IN_PROGRESS else shard
        return shard.heartbeat(group_id, member_id, group_instance_id, generation_id)

    def leave_group(self, context: RequestContext, request,
                    callback: Callable[[LeaveGroupResult], None] | None = None) -> LeaveGroupResult | None:
        """Answered at once (returned) for a classic group; for a consumer group's members the answer comes
        once their removal is durable: to `callback` (None returned)."""
        shard = self._shard_or_error(request.group_id)
        if isinstance(shard, ErrorCode):
            return LeaveGroupResult(shard)
        done: list = []

        def answer(result: LeaveGroupResult) -> None:
            if callback is not None:
                callback(result)
            done.append(result)

        at_once = shard.leave_group(request.group_id, leave_members(request, context.api_version), answer)
        if at_once is not None:
            return at_once
        return done[0] if done and callback is None else None

    # ------------------------------------------------------------ offsets

    def commit_offsets(self, request: OffsetCommit,
                       callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        shard = self._shard_or_error(request.group_id, allow_empty=True)
        if isinstance(shard, ErrorCode):
            return callback({(p.topic, p.partition): shard for p in request.offsets})
        shard.commit_offset(request, callback)

    def fetch_offsets(self, group_id: str | None, partitions: Iterable[TopicPartition] | None,
                      require_stable: bool = False, member_id: str | None = None,
                      member_epoch: int = -1) -> OffsetFetchResult:
        """`partitions` None: every committed offset of the group. A member (OffsetFetch v9) of a consumer
        group must be in its current epoch (ConsumerGroup.validateOffsetFetch)."""
        shard = self._shard_or_error(group_id, allow_empty=True)
        if isinstance(shard, ErrorCode):
            return OffsetFetchResult(group_id, shard)
        return shard.fetch_offsets(group_id, partitions, require_stable, member_id, member_epoch)

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                       callback: Callable[[tuple[ErrorCode, dict]], None]) -> None:
        shard = self._shard_or_error(group_id)
        if isinstance(shard, ErrorCode):
            return callback((shard, {}))
        shard.delete_offsets(group_id, list(partitions), callback)

    # ------------------------------------------------------------ transactions (kcoord.coordinator.txn_offsets)

    def txn_commit_offsets(self, request: OffsetCommit, producer_id: int, producer_epoch: int,
                           callback: Callable[[dict[TopicPartition, ErrorCode]], None]) -> None:
        """TxnOffsetCommit: the front door's checks as OffsetCommit's ("" is INVALID_GROUP_ID, as Kafka's
        isGroupIdNotEmpty), then pending offsets of the producer's transaction."""
        shard = self._shard_or_error(request.group_id)
        if isinstance(shard, ErrorCode):
            return callback({(p.topic, p.partition): shard for p in request.offsets})
        shard.commit_transactional_offset(request, producer_id, producer_epoch, callback)

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                             commit: bool, callback: Callable[[ErrorCode], None]) -> None:
        """A transaction marker for `__consumer_offsets-<partition>` (GroupCoordinatorService.completeTransaction)."""
        if not self.active:
            return callback(E.COORDINATOR_NOT_AVAILABLE)
        shard = self.shards.get(partition)
        if shard is None:
            if partition in self.loading:
                return callback(E.COORDINATOR_LOAD_IN_PROGRESS)
            if self.owned_partitions is not None:
                return callback(E.NOT_COORDINATOR)
            shard = self.shards[partition] = self._new_shard(partition)
            shard.on_loaded()
        shard.complete_transaction(producer_id, producer_epoch, coordinator_epoch, commit, callback)

    # ------------------------------------------------------------ DescribeGroups, ListGroups, DeleteGroups

    def describe_groups(self, group_ids: Iterable[str | None], request_version: int) -> list[DescribedGroup]:
        out = []
        for group_id in group_ids:
            shard = self._shard_or_error(group_id, allow_empty=True)
            if isinstance(shard, ErrorCode):
                out.append(DescribedGroup(group_id, shard, "", "", ""))
            else:
                out.append(shard.describe_group(group_id, request_version))
        return out

    def list_groups(self, states_filter: Iterable[str] | None = None) -> tuple[ErrorCode, list[ListedGroup]]:
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE, []
        if self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, []
        states = list(states_filter) if states_filter else None
        listed = []
        for p in sorted(self.shards):
            listed += self.shards[p].list_groups(states)
        return E.NONE, listed

    def consumer_group_describe(self, group_ids: Iterable[str | None]) -> list[DescribedConsumerGroup]:
        """ConsumerGroupDescribe (69): per group, the front door's error or the group (GROUP_ID_NOT_FOUND
        for an unknown or classic group)."""
        out = []
        for group_id in group_ids:
            shard = self._shard_or_error(group_id)
            if isinstance(shard, ErrorCode):
                out.append(DescribedConsumerGroup(group_id, shard))
                continue
            out.append(shard.consumer_group_describe(group_id, self.config.consumer_group_assignors[0]))
        return out

    def delete_groups(self, group_ids: Iterable[str | None],
                      callback: Callable[[dict[str | None, ErrorCode]], None]) -> None:
        results: dict[str | None, ErrorCode] = {}
        by_shard: dict[int, list[str]] = {}
        for group_id in group_ids:
            shard = self._shard_or_error(group_id, allow_empty=True)
            if isinstance(shard, ErrorCode):
                results[group_id] = shard
            else:
                by_shard.setdefault(shard.partition, []).append(group_id)
        if not by_shard:
            return callback(results)
        remaining = [len(by_shard)]

        def shard_done(answers: dict[str, ErrorCode]) -> None:
            results.update(answers)
            remaining[0] -= 1
            if remaining[0] == 0:
                callback(results)

        for partition, ids in by_shard.items():
            self.shards[partition].delete_groups(ids, shard_done)

    # ------------------------------------------------------------ shards: load, unload

    def begin_load(self, partition: int) -> GroupCoordinatorShard:
        """A new, empty shard for `partition`: its groups answer as "loading" until `complete_load`."""
        if (old := self.shards.pop(partition, None)) is not None:
            old.on_unloaded()
        shard = self.loading[partition] = self._new_shard(partition)
        return shard

    def complete_load(self, partition: int) -> GroupCoordinatorShard:
        """The loading shard's state is replayed: it serves from now on."""
        shard = self.loading.pop(partition)
        if self.owned_partitions is not None:
            self.owned_partitions.add(partition)
        self.shards[partition] = shard
        shard.on_loaded()
        self.log.info("Finished loading offsets and group metadata from %s-%d: %d groups", OFFSETS_TOPIC, partition,
                      shard.classic_group_count())
        return shard

    def load_partition(self, partition: int, records: Iterable = (), state: PartitionState | None = None,
                       keep_state: bool = False) -> int:
        """Load a partition at once: `state` (a checkpoint's, or empty) with `records` (objects with .key/.value or
        (key, value[, headers]) tuples, oldest first) replayed on top. Returns the number of groups loaded."""
        shard = self.begin_load(partition)
        state = PartitionState() if state is None else state
        state.replay(records, self.log)
        shard.load(state, keep_state)
        self.complete_load(partition)
        return shard.classic_group_count()

    def unload_partition(self, partition: int) -> int:
        """Give up a partition: its groups go Dead and parked requests are told NOT_COORDINATOR."""
        if self.owned_partitions is None:
            self.owned_partitions = set(range(self.config.offsets_topic_num_partitions))
        self.owned_partitions.discard(partition)
        self.epochs.pop(partition, None)
        shard = self.shards.pop(partition, None) or self.loading.pop(partition, None)
        return 0 if shard is None else shard.on_unloaded()

    # ------------------------------------------------------------ background work

    def schedule_offset_expiration(self) -> None:
        self.timer.schedule(RETENTION_TIMER_KEY, self.config.offsets_retention_check_interval_ms,
                            self._run_offset_expiration)

    def _run_offset_expiration(self) -> None:
        try:
            self.cleanup_group_metadata()
        finally:
            self.schedule_offset_expiration()

    def cleanup_group_metadata(self) -> int:
        """Offset retention (KIP-211) over every live shard; returns the tombstones written."""
        return sum(shard.cleanup_group_metadata() for shard in list(self.shards.values()))

    def handle_topics_deleted(self, topics: Iterable[str]) -> int:
        """Deleted topics take their committed offsets with them (tombstones); returns how many."""
        topics = set(topics)
        return sum(shard.handle_topics_deleted(topics) for shard in list(self.shards.values()))

    def shutdown(self) -> None:
        """Stop serving: every shard is unloaded, so parked JoinGroup/SyncGroup requests are answered
        NOT_COORDINATOR instead of hanging; later requests get COORDINATOR_NOT_AVAILABLE."""
        self.active = False
        self.timer.cancel(RETENTION_TIMER_KEY)
        for partition in sorted(set(self.shards) | set(self.loading)):
            shard = self.shards.pop(partition, None) or self.loading.pop(partition)
            shard.on_unloaded()
