"""Idempotent producers: producer-id allocation and per-partition sequence state.

- Ids come from blocks (kcoord.metadata.producer_ids): in single-node mode a file in log.dirs, in cluster
  mode the metadata store's `producer_id_block` key, claimed by compare-and-set, so no two nodes and no
  restart hand out the same id. While a cluster node has no block yet, InitProducerId is answered
  COORDINATOR_LOAD_IN_PROGRESS (RPCProducerIdManager), which clients retry.
- Per partition and producer we keep the epoch and the last 5 batches (Kafka's window): a retried
  batch that matches one of them is answered with its original offsets instead of being appended
  again; anything else must continue the sequence (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise), and an
  older epoch is fenced (INVALID_PRODUCER_EPOCH).
- After a restart, a partition's state is rebuilt on first use by scanning its batches, so a producer
  that retries across the restart still gets duplicate detection.
- Each producer entry keeps the coordinator epoch of the last transaction marker it got (Kafka's
  ProducerStateEntry.coordinatorEpoch), read back from the markers' values by that scan: a marker from an
  older coordinator epoch is refused (TRANSACTION_COORDINATOR_FENCED). Followers keep no producer state;
  a new leader rebuilds it from its log, markers included, so the check survives a failover.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kcoord.metadata.producer_ids import FileProducerIds, ProducerIdSource, ProducerIdsUnavailable
from kcoord.protocol.control_records import marker_coordinator_epoch
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_kv import batch_key_values
from kcoord.protocol.records import iter_batches

BATCH_WINDOW = 5
MAX_EPOCH = 32767
INT32_MAX = 2**31 - 1
_SCAN_READ_BYTES = 1 << 20

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCH_WINDOW))
    coordinator_epoch: int = -1  # of the last transaction marker (-1: none seen)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateManager:
    def __init__(self, log_dir: str, logs: Any) -> None:
        self._logs = logs
        # single-node mode's; a cluster node swaps in the metadata store's (use_ids) as it joins
        self.ids: ProducerIdSource = FileProducerIds(log_dir)
        self._partitions: dict[TopicPartition, dict[int, ProducerEntry]] = {}

    # -- InitProducerId ---------------------------------------------------------------------------
    def init_producer(self, producer_id: int, producer_epoch: int) -> tuple[ErrorCode, int, int]:
        """(error, producer_id, epoch). An existing id+epoch (KIP-360) gets its epoch bumped."""
        if producer_id >= 0 and producer_epoch >= 0:
            if not self.ids.was_allocated(producer_id):
                return ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1, -1
            if producer_epoch + 1 < MAX_EPOCH:
                return ErrorCode.NONE, producer_id, producer_epoch + 1
        producer_id = self.allocate_id_or_error()
        if isinstance(producer_id, ErrorCode):
            return producer_id, -1, -1
        return ErrorCode.NONE, producer_id, 0

    def use_ids(self, ids: ProducerIdSource) -> None:
        """Take ids from `ids` from now on (a cluster node: the metadata store's blocks)."""
        self.ids = ids

    def allocate_id_or_error(self) -> int | ErrorCode:
        """A new producer id, or COORDINATOR_LOAD_IN_PROGRESS while there is none to give, as Kafka's
        RPCProducerIdManager answers InitProducerId (what the transaction coordinator calls)."""
        try:
            return self.ids.generate()
        except ProducerIdsUnavailable:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    # -- Produce ----------------------------------------------------------------------------------
    def check(self, tp: TopicPartition, log: Any, header: Any) -> BatchMeta | ErrorCode | None:
        """Before appending an idempotent batch: a BatchMeta for a duplicate, an error, or None (append)."""
        entry = self._state(tp, log).get(header.producer_id)
        if entry is None:
            # No state (new producer, or its batches were removed): accept, as Kafka does.
            return None
        if header.producer_epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        last_seq = header.base_sequence + header.last_offset_delta
        if header.producer_epoch > entry.epoch:
            return None if header.base_sequence == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        for meta in entry.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == last_seq:
                return meta
        if header.base_sequence != _next_seq(entry.last_seq):
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        return None

    def record(self, tp: TopicPartition, header: Any, first_offset: int, last_offset: int,
               timestamp: int) -> None:
        """After a successful append of an idempotent batch."""
        state = self._partitions.setdefault(tp, {})
        self._apply(state, header.producer_id, header.producer_epoch, header.base_sequence,
                    header.base_sequence + header.last_offset_delta, first_offset, last_offset, timestamp)

    def on_marker(self, tp: TopicPartition, log: Any, producer_id: int, epoch: int,
                  coordinator_epoch: int = 0) -> None:
        """A transaction marker was appended: a higher epoch (the coordinator fenced the producer) resets
        the producer's entry, so batches of the old epoch are refused; its coordinator epoch is kept."""
        self._fence(self._state(tp, log), producer_id, epoch, coordinator_epoch)

    def coordinator_epoch_of(self, tp: TopicPartition, log: Any, producer_id: int) -> int:
        """The coordinator epoch of the producer's last marker in this partition (-1: none)."""
        entry = self._state(tp, log).get(producer_id)
        return -1 if entry is None else entry.coordinator_epoch

    @staticmethod
    def _fence(state: dict[int, ProducerEntry], producer_id: int, epoch: int, coordinator_epoch: int = -1) -> None:
        entry = state.get(producer_id)
        if entry is None or epoch > entry.epoch:
            state[producer_id] = ProducerEntry(epoch, coordinator_epoch=-1 if entry is None else entry.coordinator_epoch)
            entry = state[producer_id]
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)

    def epoch_of(self, tp: TopicPartition, log: Any, producer_id: int) -> int:
        """The producer's epoch in this partition (-1: unknown here)."""
        entry = self._state(tp, log).get(producer_id)
        return -1 if entry is None else entry.epoch

    def active_producers(self, tp: TopicPartition, log: Any) -> list[tuple[int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp) of the partition's producers (DescribeProducers)."""
        return [(pid, e.epoch, e.last_seq, e.batches[-1].timestamp if e.batches else -1)
                for pid, e in sorted(self._state(tp, log).items())]

    def forget_partition(self, tp: TopicPartition) -> None:
        """Drop what is known of `tp`'s producers; the next look rebuilds it from the log (cluster mode: a
        follower's fetcher appends and truncates without telling this cache, so a new leader starts over)."""
        self._partitions.pop(tp, None)

    def forget_topic(self, topic: str) -> None:
        for tp in [tp for tp in self._partitions if tp[0] == topic]:
            del self._partitions[tp]

    # -- internals --------------------------------------------------------------------------------
    @staticmethod
    def _apply(state: dict[int, ProducerEntry], pid: int, epoch: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp: int) -> None:
        entry = state.get(pid)
        if entry is None or epoch > entry.epoch:
            entry = state[pid] = ProducerEntry(epoch, coordinator_epoch=-1 if entry is None else entry.coordinator_epoch)
        entry.batches.append(BatchMeta(first_seq, last_seq, first_offset, last_offset, timestamp))

    def _state(self, tp: TopicPartition, log: Any) -> dict[int, ProducerEntry]:
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = self._rebuild(log)
        return state

    def _rebuild(self, log: Any) -> dict[int, ProducerEntry]:
        state: dict[int, ProducerEntry] = {}
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            data = log.read(offset, _SCAN_READ_BYTES)
            progressed = False
            for _pos, h, batch in iter_batches(data):
                if h.last_offset < offset:
                    continue
                if h.is_control and h.producer_id >= 0:
                    kvs = batch_key_values(batch, h)
                    self._fence(state, h.producer_id, h.producer_epoch,
                                marker_coordinator_epoch(kvs[0][1]) if kvs else -1)
                elif h.producer_id >= 0 and h.base_sequence >= 0:
                    self._apply(state, h.producer_id, h.producer_epoch, h.base_sequence,
                                h.base_sequence + h.last_offset_delta, h.base_offset, h.last_offset,
                                h.max_timestamp)
                offset = h.next_offset
                progressed = True
            if not progressed:
                break
        return state
