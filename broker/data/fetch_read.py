"""Reading for Fetch: partitions below their high watermark within the byte limits, long-polling until
min_bytes are there (Kafka's DelayedFetch, reduced to one node). The handler decodes and encodes.

read_committed (isolation level 1, KIP-98) reads below the last stable offset only, and each partition
carries the aborted transactions overlapping what it returns (kcoord.broker.data.txn_index).

Limits as KIP-74: partition_max_bytes per partition and max_bytes for the whole response, except that
the first data in the response is a whole batch even if it is larger, so a consumer always progresses.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kcoord.broker.data.visibility import high_watermark
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import iter_batches

if TYPE_CHECKING:
    from kcoord.cluster.replica_manager import ReplicaManager

READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    topic: str | None  # None: a topic id we do not know
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1  # -1: the client does not ask for fencing (Fetch before v9)
    last_fetched_epoch: int = -1  # the epoch of the last batch the client read (Fetch v12+); -1: no check


@dataclass(slots=True)
class PartitionRead:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | None = None
    last_stable_offset: int = -1
    aborted: list | None = None  # (producer id, first offset) of aborted transactions in `records`
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) where the client's log left ours


def leader_epoch_error(plog: Any, current_leader_epoch: int) -> ErrorCode:
    """Kafka's Partition.validateCurrentLeaderEpoch: a client that knows an older leader epoch is fenced
    (it refreshes its metadata), one that knows a newer one waits for this broker to catch up."""
    if current_leader_epoch < 0 or current_leader_epoch == plog.leader_epoch:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < plog.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH


async def read_when_ready(broker: Any, wanted: list[PartitionFetch], max_bytes: int, min_bytes: int,
                          max_wait_ms: int, isolation_level: int = 0) -> list[PartitionRead]:
    """Read now; if less than min_bytes came back, wait for the high watermark of one of the
    partitions to move (or max_wait_ms, or shutdown) and read again."""
    deadline = time.monotonic() + max(max_wait_ms, 0) / 1000.0
    known = [(w.topic, w.partition) for w in wanted if w.topic is not None]
    replication = broker.visibility.replication
    while True:
        reads, total = read(broker.topics, wanted, max_bytes, broker.txn_index, isolation_level, replication)
        # A partition error or a diverging epoch answers at once, as Kafka's DelayedFetch completes on one.
        failed = any(r.error or r.diverging_epoch for r in reads)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or failed or remaining <= 0 or broker.stopping or not known:
            return reads
        if not await broker.fetch_waiters.wait(known, remaining):
            return read(broker.topics, wanted, max_bytes, broker.txn_index, isolation_level, replication)[0]


def read(topics: Any, wanted: list[PartitionFetch], max_bytes: int, txn_index: Any = None,
         isolation_level: int = 0, replication: ReplicaManager | None = None) -> tuple[list[PartitionRead], int]:
    """One pass over the partitions, in request order; returns the reads and the bytes read.
    `replication` (cluster mode): leader checks and the ISR's high watermark."""
    reads = []
    total = 0
    for w in wanted:
        result = _read_partition(topics, w, max_bytes - total, total == 0, txn_index, isolation_level, replication)
        total += len(result.records or b"")
        reads.append(result)
    return reads, total


def _read_partition(topics: Any, w: PartitionFetch, budget_left: int, first: bool, txn_index: Any,
                    isolation_level: int, replication: ReplicaManager | None = None) -> PartitionRead:
    if w.topic is None:
        return PartitionRead(ErrorCode.UNKNOWN_TOPIC_ID)
    plog = topics.log(w.topic, w.partition)
    if plog is None:
        return PartitionRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if replication is None
                             else replication.not_held_error(w.topic, w.partition))
    if replication is None:
        fenced, hw = leader_epoch_error(plog, w.current_leader_epoch), high_watermark(plog)
    else:  # cluster mode: the leader's epoch check, and the ISR's high watermark
        fenced, hw = replication.consumer_fetch_bounds(w.topic, w.partition, w.current_leader_epoch,
                                                       high_watermark(plog))
    if fenced:
        return PartitionRead(fenced)
    start, end = plog.log_start_offset, plog.log_end_offset
    lso = hw if txn_index is None else txn_index.last_stable_offset(plog)
    if replication is not None:
        lso = min(lso, hw)
    if w.last_fetched_epoch >= 0:
        diverged = _divergence(plog, w, start)
        if diverged is not None:
            if diverged == ErrorCode.OFFSET_OUT_OF_RANGE:
                return PartitionRead(ErrorCode.OFFSET_OUT_OF_RANGE, hw, start, None, lso)
            return PartitionRead(ErrorCode.NONE, hw, start, b"", lso, diverging_epoch=diverged)
    if not start <= w.fetch_offset <= end:
        return PartitionRead(ErrorCode.OFFSET_OUT_OF_RANGE, hw, start, None, lso)
    records = b""
    budget = min(w.partition_max_bytes, budget_left)
    # Between the high watermark and the log end there is nothing to read yet (as in Kafka);
    # read_committed stops at the last stable offset.
    limit = lso if isolation_level == READ_COMMITTED else hw
    if w.fetch_offset < limit and (budget > 0 or first):
        # Storage returns at least one whole batch: right only for the first data in the response.
        records = plog.read(w.fetch_offset, max(budget, 1), max_offset=limit)
        if not first and len(records) > budget:
            records = b""
    aborted = None
    if isolation_level == READ_COMMITTED and txn_index is not None:
        aborted = txn_index.aborted_between(plog, w.fetch_offset, _end_of(records, limit)) if records else []
    return PartitionRead(ErrorCode.NONE, hw, start, records, lso, aborted)


def _divergence(plog: Any, w: PartitionFetch, start: int) -> tuple[int, int] | ErrorCode | None:
    """Kafka's Partition.readRecords with a LastFetchedEpoch: where that epoch ends in our log (the epoch
    cache's endOffsetFor). Not known -> OFFSET_OUT_OF_RANGE; a fetch offset below the log start ->
    OFFSET_OUT_OF_RANGE whatever the epochs; our epoch older than the client's, or ending before its
    fetch offset -> the client's log diverges: (epoch, end offset) to truncate to; else None (read)."""
    epoch, end_offset = plog.end_offset_for_epoch(w.last_fetched_epoch)
    if epoch < 0 or end_offset < 0 or w.fetch_offset < start:
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if epoch < w.last_fetched_epoch or end_offset < w.fetch_offset:
        return epoch, end_offset
    return None


def _end_of(records: bytes, limit: int) -> int:
    """The offset after the last batch in `records` (whole batches), at most `limit`."""
    last = None
    for _pos, header, _batch in iter_batches(records):
        last = header
    return limit if last is None else min(limit, last.next_offset)


def replica_id_of(request: Any, version: int) -> int:
    """A Fetch's replica id: a follower's node id, -1 from a consumer (v15+: the ReplicaState tagged field,
    which consumers leave out)."""
    if version < 15:
        return request.replica_id
    return -1 if request.replica_state is None else request.replica_state.replica_id
