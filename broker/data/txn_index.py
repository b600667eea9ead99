"""Transactions in each data partition: the last stable offset and the aborted transactions
(Kafka's ProducerStateManager ongoing transactions + the aborted-transaction index, per partition).

- `ongoing`: producer id -> offset of its open transaction's first batch. The last stable offset (LSO)
  is the smallest of them, capped at the high watermark: read_committed consumers read below it.
- `aborted`: (producer id, first offset, marker offset) of every aborted transaction: Fetch returns the
  ones that overlap what it returns, so read_committed consumers drop those batches.
A partition's index is built on first use by scanning its log, so it survives restarts; afterwards the
produce path (`on_append`) and the marker writer (`on_marker`) keep it current.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kcoord.broker.data.visibility import high_watermark
from kcoord.protocol.control_records import COMMIT, marker_type
from kcoord.protocol.record_kv import batch_key_values
from kcoord.protocol.records import iter_batches

_SCAN_READ_BYTES = 1 << 20

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PartitionTxns:
    ongoing: dict[int, int] = field(default_factory=dict)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # by marker offset
    last_marker: dict[int, int] = field(default_factory=dict)  # producer id -> offset of its last marker

    def start(self, producer_id: int, offset: int) -> None:
        self.ongoing.setdefault(producer_id, offset)

    def ended_since(self, producer_id: int, offset: int) -> bool:
        """Whether a marker of the producer was written at or after `offset` (a transaction verified before
        it is over: Kafka's VerificationGuard, cleared by the marker)."""
        return self.last_marker.get(producer_id, -1) >= offset

    def end(self, producer_id: int, commit: bool, marker_offset: int) -> None:
        self.last_marker[producer_id] = marker_offset
        first = self.ongoing.pop(producer_id, None)
        if not commit and first is not None:
            self.aborted.append((producer_id, first, marker_offset))


class TxnIndex:
    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, PartitionTxns] = {}

    def state(self, plog: Any) -> PartitionTxns:
        tp = (plog.topic, plog.partition)
        txns = self._partitions.get(tp)
        if txns is None:
            txns = self._partitions[tp] = _scan(plog)
        return txns

    def on_append(self, plog: Any, producer_id: int, base_offset: int) -> None:
        """A transactional data batch was appended at base_offset."""
        self.state(plog).start(producer_id, base_offset)

    def last_stable_offset(self, plog: Any) -> int:
        hw = high_watermark(plog)
        tp = (plog.topic, plog.partition)
        txns = self._partitions.get(tp)
        if txns is None:
            txns = self.state(plog)
        if not txns.ongoing:
            return hw
        return min(hw, min(txns.ongoing.values()))

    def aborted_between(self, plog: Any, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions with data in [start, end)."""
        txns = self.state(plog)
        if txns.aborted and txns.aborted[0][2] < plog.log_start_offset:  # retention took them
            txns.aborted = [a for a in txns.aborted if a[2] >= plog.log_start_offset]
        return [(pid, first) for pid, first, last in txns.aborted if last >= start and first < end]

    def forget_partition(self, tp: TopicPartition) -> None:
        """Drop `tp`'s index; the next look rebuilds it from the log (cluster mode: a follower's fetcher
        appends and truncates without telling it, so a new leader starts over)."""
        self._partitions.pop(tp, None)

    def forget_topic(self, topic: str) -> None:
        for tp in [tp for tp in self._partitions if tp[0] == topic]:
            del self._partitions[tp]


def _scan(plog: Any) -> PartitionTxns:
    txns = PartitionTxns()
    offset, end = plog.log_start_offset, plog.log_end_offset
    while offset < end:
        data = plog.read(offset, _SCAN_READ_BYTES)
        progressed = False
        for _pos, h, batch in iter_batches(data):
            if h.last_offset < offset:
                continue
            if h.is_transactional:
                if h.is_control:
                    kvs = batch_key_values(batch, h)
                    kind = marker_type(kvs[0][0]) if kvs else None
                    if kind is not None:
                        txns.end(h.producer_id, kind == COMMIT, h.base_offset)
                else:
                    txns.start(h.producer_id, h.base_offset)
            offset = h.next_offset
            progressed = True
        if not progressed:
            break
    return txns
