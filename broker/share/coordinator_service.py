"""The share coordinator in a cluster (Kafka's ShareCoordinatorService / ShareCoordinatorShard): it lives on
the leader of each `__share_group_state` partition and answers the share-state RPCs for the share-partitions
whose key ("groupId:topicId:partition") hashes to that partition.

- It is that topic's listener of the node's CoordinatorRoles: `on_election(partition, epoch)` replays the
  partition's records from the local replica into one DurableShareState per share-partition;
  `on_resignation` drops them. A share-partition of a partition not led here answers NOT_COORDINATOR.
- A write (Initialize / Write / Delete, and a Read at a higher leader epoch, which records the epoch as
  readStateAndMaybeUpdateLeaderEpoch does) becomes one ShareSnapshot / ShareUpdate record (the snapshot
  rule of kcoord.share.state), appended as the partition's leader and answered once the ISR holds it
  (ReplicaManager.wait_acks_all, `share.coordinator.state.topic.min.isr`); only then is it replayed.
  A partition that changed hands while the write waited answers NOT_COORDINATOR and changes nothing.
- Fencing as ShareCoordinatorShard: a leader epoch lower than the one recorded is FENCED_LEADER_EPOCH,
  a state epoch lower than the recorded one FENCED_STATE_EPOCH (an older data leader cannot overwrite
  what the new one wrote).

Pruning of the topic (the single-node ShareCoordinator's) is not done here: the log keeps every record.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kcoord.broker.share.coordinator import SHARE_GROUP_STATE, ShareKey
from kcoord.coordinator.common.runtime import append_replicated
from kcoord.protocol.errors import DecodeError, ErrorCode
from kcoord.protocol.record_kv import batch_key_values
from kcoord.protocol.records import build_batch
from kcoord.share import records as r
from kcoord.share.state import DurableShareState, expand
from kcoord.storage import StorageError

if TYPE_CHECKING:
    from kcoord.broker.app import Broker

log = logging.getLogger("kcoord.share")

Answer = tuple[ErrorCode, str | None]


class ShareCoordinatorService:
    """`broker.share_coordinator` in cluster mode (a kcoord.broker.coordinator_roles.CoordinatorElection)."""

    def __init__(self, broker: Broker, now_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.broker = broker
        self.now_ms = now_ms
        self.num_partitions: int = broker.config.get("share.coordinator.state.topic.num.partitions")
        self._epochs: dict[int, int] = {}  # loaded partition -> the leader epoch it was loaded at
        self._states: dict[int, dict[ShareKey, DurableShareState]] = defaultdict(dict)

    # ---------------------------------------------------------------- elections

    def partition_for(self, key: ShareKey) -> int:
        topic = self.broker.topics.get(SHARE_GROUP_STATE)
        return r.share_state_partition(*key, topic.partitions if topic is not None else self.num_partitions)

    def on_election(self, partition: int, leader_epoch: int) -> None:
        """Replay the partition's records (the local replica is the leader's now) and serve its keys."""
        started = time.monotonic()
        states: dict[ShareKey, DurableShareState] = {}
        plog = self.broker.logs.get(SHARE_GROUP_STATE, partition)
        try:
            for header, batch in ([] if plog is None else plog.batches(max_offset=plog.log_end_offset)):
                if header.is_control:
                    continue
                for key, value in batch_key_values(batch, header):
                    self._replay_into(states, key, value, partition)
        except StorageError:
            log.exception("cannot load %s-%d; not serving its share-partitions", SHARE_GROUP_STATE, partition)
            return
        self._states[partition] = states
        self._epochs[partition] = leader_epoch
        log.info("elected for %s-%d at epoch %d: %d share-partitions loaded in %.1f ms", SHARE_GROUP_STATE,
                 partition, leader_epoch, len(states), (time.monotonic() - started) * 1000)

    def on_resignation(self, partition: int, leader_epoch: int | None) -> None:
        self._epochs.pop(partition, None)
        self._states.pop(partition, None)
        log.info("resigned %s-%d (epoch %s)", SHARE_GROUP_STATE, partition, leader_epoch)

    @staticmethod
    def _replay_into(states: dict[ShareKey, DurableShareState], key: bytes, value: bytes | None,
                     partition: int) -> None:
        gone = r.deleted(key, value)
        if gone is not None:
            states.pop(gone, None)
            return
        try:
            record = r.decode(key, value)
        except DecodeError as e:
            log.warning("skipping undecodable %s-%d record: %s", SHARE_GROUP_STATE, partition, e)
            return
        share_key = (record.group_id, record.topic_id, record.partition)
        state = states.get(share_key)
        if state is None:
            state = states[share_key] = DurableShareState(*share_key)
        state.replay(record)

    def _shard(self, key: ShareKey) -> tuple[int, dict[ShareKey, DurableShareState]] | ErrorCode:
        partition = self.partition_for(key)
        if partition not in self._epochs:
            return ErrorCode.NOT_COORDINATOR
        return partition, self._states[partition]

    # ---------------------------------------------------------------- the share-state RPCs

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> Answer:
        """InitializeShareGroupState: a snapshot at `start_offset` and `state_epoch`, nothing in flight."""
        shard = self._shard(key)
        if isinstance(shard, ErrorCode):
            return shard, None
        current = shard[1].get(key)
        if current is not None and current.exists and state_epoch <= current.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH, "The state epoch is not newer than the current one."
        leader_epoch = current.leader_epoch if current is not None else 0
        record = DurableShareState(*key).initial_record(start_offset, state_epoch, leader_epoch, self.now_ms())
        return await self._write(key, shard[0], r.encode(record))

    async def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, str | None, DurableShareState | None]:
        """ReadShareGroupState: the state (None: never initialized); a higher leader epoch is recorded first."""
        shard = self._shard(key)
        if isinstance(shard, ErrorCode):
            return shard, None, None
        state = shard[1].get(key)
        if state is None or not state.exists:
            return ErrorCode.NONE, None, None
        if leader_epoch < state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch is older than the recorded one.", None
        if leader_epoch > state.leader_epoch:
            record = state.record_for(state.start_offset, {}, state.delivery_complete_count, leader_epoch,
                                      self.now_ms())
            error, message = await self._write(key, shard[0], r.encode(record))
            if error != ErrorCode.NONE:
                return error, message, None
            state = self._states[shard[0]].get(key)
        return ErrorCode.NONE, None, state

    async def write(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Sequence[r.StateBatch], delivery_complete_count: int) -> Answer:
        """WriteShareGroupState: the changed batches (and start offset unless -1) over the current state."""
        shard = self._shard(key)
        if isinstance(shard, ErrorCode):
            return shard, None
        state = shard[1].get(key)
        if state is None or not state.exists:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no state to write on."
        if leader_epoch < state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch is older than the recorded one."
        if state_epoch < state.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH, "The state epoch is older than the recorded one."
        start = state.start_offset if start_offset < 0 else start_offset
        record = state.record_for(start, expand(batches, start), delivery_complete_count, leader_epoch,
                                  self.now_ms())
        return await self._write(key, shard[0], r.encode(record))

    async def delete(self, key: ShareKey) -> Answer:
        """DeleteShareGroupState: a tombstone of the share-partition's snapshot key."""
        shard = self._shard(key)
        if isinstance(shard, ErrorCode):
            return shard, None
        if key not in shard[1]:
            return ErrorCode.NONE, None
        return await self._write(key, shard[0], (r.snapshot_key(*key), None, ()))

    def summary(self, key: ShareKey) -> tuple[ErrorCode, DurableShareState | None]:
        """ReadShareGroupStateSummary: the state as recorded, no leader epoch recorded."""
        shard = self._shard(key)
        if isinstance(shard, ErrorCode):
            return shard, None
        state = shard[1].get(key)
        return ErrorCode.NONE, state if state is not None and state.exists else None

    # ---------------------------------------------------------------- the replicated append

    async def _write(self, key: ShareKey, partition: int, record: tuple) -> Answer:
        leader_epoch = self._epochs.get(partition)
        replication = self.broker.visibility.replication
        plog = self.broker.logs.get(SHARE_GROUP_STATE, partition)
        if leader_epoch is None or replication is None or plog is None:
            return ErrorCode.NOT_COORDINATOR, None
        k, v, _h = record
        error = await append_replicated(replication, plog, SHARE_GROUP_STATE, partition,
                                        bytearray(build_batch([(k, v)])), log)
        if error != ErrorCode.NONE:
            return error, None
        if self._epochs.get(partition) != leader_epoch:
            return ErrorCode.NOT_COORDINATOR, None  # resigned (and maybe re-elected) meanwhile: reloaded
        self._replay_into(self._states[partition], k, v, partition)
        return ErrorCode.NONE, None
