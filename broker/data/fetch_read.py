"""Reading for Fetch: partitions below their high watermark within the byte limits, long-polling until
min_bytes are there (Kafka's DelayedFetch, reduced to one node). The handler decodes and encodes.

Limits as KIP-74: partition_max_bytes per partition and max_bytes for the whole response, except that
the first data in the response is a whole batch even if it is larger, so a consumer always progresses.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from broker.data.visibility import high_watermark
from protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    topic: str | None  # None: a topic id we do not know
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1  # -1: the client does not ask for fencing (Fetch before v9)


@dataclass(slots=True)
class PartitionRead:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | None = None


def leader_epoch_error(plog: Any, current_leader_epoch: int) -> ErrorCode:
    """Kafka's Partition.validateCurrentLeaderEpoch: a client that knows an older leader epoch is fenced
    (it refreshes its metadata), one that knows a newer one waits for this broker to catch up."""
    if current_leader_epoch < 0 or current_leader_epoch == plog.leader_epoch:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < plog.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH


async def read_when_ready(broker: Any, wanted: list[PartitionFetch], max_bytes: int, min_bytes: int,
                          max_wait_ms: int) -> list[PartitionRead]:
    """Read now; if less than min_bytes came back, wait for the high watermark of one of the
    partitions to move (or max_wait_ms, or shutdown) and read again."""
    deadline = time.monotonic() + max(max_wait_ms, 0) / 1000.0
    known = [(w.topic, w.partition) for w in wanted if w.topic is not None]
    while True:
        reads, total = read(broker.topics, wanted, max_bytes)
        # A partition error answers at once, as Kafka's DelayedFetch completes on one.
        failed = any(r.error for r in reads)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or failed or remaining <= 0 or broker.stopping or not known:
            return reads
        if not await broker.fetch_waiters.wait(known, remaining):
            return read(broker.topics, wanted, max_bytes)[0]


def read(topics: Any, wanted: list[PartitionFetch], max_bytes: int) -> tuple[list[PartitionRead], int]:
    """One pass over the partitions, in request order; returns the reads and the bytes read."""
    reads = []
    total = 0
    for w in wanted:
        result = _read_partition(topics, w, max_bytes - total, first=total == 0)
        total += len(result.records or b"")
        reads.append(result)
    return reads, total


def _read_partition(topics: Any, w: PartitionFetch, budget_left: int, first: bool) -> PartitionRead:
    if w.topic is None:
        return PartitionRead(ErrorCode.UNKNOWN_TOPIC_ID)
    plog = topics.log(w.topic, w.partition)
    if plog is None:
        return PartitionRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    fenced = leader_epoch_error(plog, w.current_leader_epoch)
    if fenced:
        return PartitionRead(fenced)
    start, end, hw = plog.log_start_offset, plog.log_end_offset, high_watermark(plog)
    if not start <= w.fetch_offset <= end:
        return PartitionRead(ErrorCode.OFFSET_OUT_OF_RANGE, hw, start)
    records = b""
    budget = min(w.partition_max_bytes, budget_left)
    # Between the high watermark and the log end there is nothing to read yet (as in Kafka).
    if w.fetch_offset < hw and (budget > 0 or first):
        # Storage returns at least one whole batch: right only for the first data in the response.
        records = plog.read(w.fetch_offset, max(budget, 1), max_offset=hw)
        if not first and len(records) > budget:
            records = b""
    return PartitionRead(ErrorCode.NONE, hw, start, records)
