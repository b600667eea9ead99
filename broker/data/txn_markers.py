"""Writing transaction markers (Kafka's TransactionMarkerChannelManager + KafkaApis.handleWriteTxnMarkersRequest,
on one node): a COMMIT or ABORT control batch to every partition of a transaction.

Data partitions get the control batch appended (producer id and the transaction's epoch, so the producer's
state there learns a fencing epoch), the partition's transaction index closes the transaction, and the
append is fsynced before the marker counts as written. `__consumer_offsets` partitions get theirs through
the group coordinator (`broker.group_coordinator.complete_transaction`), which writes the same control batch and
replays it: pending transactional offsets are applied or dropped. A failed write is retried until it
succeeds; a partition whose topic is gone is skipped (as Kafka drops markers for deleted topics).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from kcoord.protocol.consumer_offsets import OFFSETS_TOPIC
from kcoord.protocol.control_records import end_txn_marker_batch
from kcoord.protocol.errors import ErrorCode
from kcoord.storage import StorageError

log = logging.getLogger("kcoord.txn")
RETRY_BACKOFF_S = 0.5


# What a failed marker leaves to retry; the others are final (a partition gone, a newer producer epoch).
_RETRIABLE = frozenset({ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                        ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_SERVER_ERROR})


class MarkerWriter:
    def __init__(self, broker: Any) -> None:
        self.broker = broker

    async def __call__(self, producer_id: int, epoch: int, commit: bool, partitions: set) -> None:
        """The transaction coordinator's markers: retried until every partition has its marker."""
        left = set(partitions)
        while left:
            errors = await self.write(producer_id, epoch, commit, left)
            for tp, error in errors.items():
                if error != ErrorCode.NONE and error not in _RETRIABLE:
                    log.info("dropping the marker for %s-%d: %s", *tp, ErrorCode(error).name)
            left = {tp for tp, error in errors.items() if error in _RETRIABLE}
            if left:
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def write(self, producer_id: int, epoch: int, commit: bool, partitions) -> dict:
        """One attempt at every partition's marker (WriteTxnMarkers' per-partition answer). Data partitions
        and `__consumer_offsets` ones are written concurrently (one fsync round for all, as Kafka sends to
        every leader at once)."""
        data, offsets = await asyncio.gather(self._data(producer_id, epoch, commit, partitions),
                                             self._offsets(producer_id, epoch, commit, partitions))
        return data | offsets

    async def _data(self, producer_id: int, epoch: int, commit: bool, partitions) -> dict:
        errors: dict = {}
        logs = []
        for tp in sorted(p for p in partitions if p[0] != OFFSETS_TOPIC):
            plog = self.broker.topics.log(*tp)
            if plog is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if self.broker.producers.epoch_of(tp, plog, producer_id) > epoch:
                errors[tp] = ErrorCode.INVALID_PRODUCER_EPOCH  # a marker of a fenced epoch (ProducerStateManager)
                continue
            index = self.broker.txn_index.state(plog)  # built before the append: the scan must not see it
            try:
                info = plog.append(bytearray(end_txn_marker_batch(producer_id, epoch, commit)))
            except StorageError as exc:
                log.warning("writing a marker to %s-%d failed: %s", *tp, exc)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            index.end(producer_id, commit, info.base_offset)
            self.broker.producers.on_marker(tp, plog, producer_id, epoch)
            logs.append(plog)
        for plog, error in zip(logs, await self.broker.visibility.publish(logs), strict=True):
            errors[(plog.topic, plog.partition)] = ErrorCode.NONE if error is None else ErrorCode.KAFKA_STORAGE_ERROR
        return errors

    async def _offsets(self, producer_id: int, epoch: int, commit: bool, partitions) -> dict:
        tps = sorted(p for p in partitions if p[0] == OFFSETS_TOPIC)
        groups = self.broker.group_coordinator
        errors = await asyncio.gather(*(groups.complete_transaction(tp[1], producer_id, epoch, commit) for tp in tps))
        for tp, error in zip(tps, errors, strict=True):
            if error != ErrorCode.NONE:
                log.warning("writing a marker to %s-%d failed: %s", *tp, ErrorCode(error).name)
        return dict(zip(tps, (ErrorCode(e) for e in errors), strict=True))
