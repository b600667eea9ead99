"""Writing transaction markers on this node (KafkaApis.handleWriteTxnMarkersRequest and, on a single node,
Kafka's TransactionMarkerChannelManager): a COMMIT or ABORT control batch to every partition of a transaction.

Data partitions get the control batch appended (producer id and the transaction's epoch, so the producer's
state there learns a fencing epoch; the coordinator epoch in its value), the partition's transaction index
closes the transaction, and the append is fsynced before the marker counts as written. A marker of an older
producer epoch is refused INVALID_PRODUCER_EPOCH (under transaction version 2, WriteTxnMarkers v2's
TransactionVersion, also one of the current epoch: a TV2 end always bumps it, so an equal epoch is a stale
marker; KIP-1228), one of an older coordinator epoch than the producer's last
marker there TRANSACTION_COORDINATOR_FENCED (ProducerAppendInfo.appendEndTxnMarker). `__consumer_offsets`
partitions get theirs through the group coordinator (`broker.group_coordinator.complete_transaction`), which
writes the same control batch and replays it: pending transactional offsets are applied or dropped. A failed
write is retried until it succeeds; a partition whose topic is gone is skipped (as Kafka drops markers for
deleted topics).

Cluster mode: a data partition takes its marker only as its leader (NOT_LEADER_OR_FOLLOWER otherwise,
NOT_ENOUGH_REPLICAS below min ISR), and the marker is answered once the ISR holds it (acks=-1, as Kafka's
handler appends); the coordinator's markers go to each partition's current leader through
kcoord.broker.data.txn_marker_channel.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from kcoord.broker.data.txn_marker_channel import TxnMarkerChannel
from kcoord.protocol.consumer_offsets import OFFSETS_TOPIC
from kcoord.protocol.control_records import end_txn_marker_batch
from kcoord.protocol.errors import ErrorCode
from kcoord.storage import StorageError

log = logging.getLogger("kcoord.txn")
RETRY_BACKOFF_S = 0.5
MARKER_APPEND_TIMEOUT_MS = 30_000  # request.timeout.ms, the timeout Kafka's handler gives the acks=-1 append


# What a failed marker leaves to retry; the others are final (a partition gone, a newer producer epoch).
_RETRIABLE = frozenset({ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                        ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_SERVER_ERROR})


class MarkerWriter:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._channel: TxnMarkerChannel | None = None  # cluster mode, made on first use

    async def __call__(self, producer_id: int, epoch: int, commit: bool, partitions: set,
                       coordinator_epoch: int = 0, transaction_version: int = 0) -> None:
        """The transaction coordinator's markers: retried until every partition has its marker."""
        cluster = self.broker.cluster
        if cluster is not None:
            if self._channel is None:
                self._channel = TxnMarkerChannel(cluster.node_id, lambda: cluster.image, self.write,
                                                 self.broker.listeners[0].host)
            await self._channel.send(producer_id, epoch, commit, partitions, coordinator_epoch, transaction_version)
            return
        left = set(partitions)
        while left:
            errors = await self.write(producer_id, epoch, commit, left, coordinator_epoch, transaction_version)
            for tp, error in errors.items():
                if error != ErrorCode.NONE and error not in _RETRIABLE:
                    log.info("dropping the marker for %s-%d: %s", *tp, ErrorCode(error).name)
            left = {tp for tp, error in errors.items() if error in _RETRIABLE}
            if left:
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def write(self, producer_id: int, epoch: int, commit: bool, partitions, coordinator_epoch: int = 0,
                    transaction_version: int = 0) -> dict:
        """One attempt at every partition's marker (WriteTxnMarkers' per-partition answer). Data partitions
        and `__consumer_offsets` ones are written concurrently (one fsync round for all, as Kafka sends to
        every leader at once)."""
        data, offsets = await asyncio.gather(self._data(producer_id, epoch, commit, partitions, coordinator_epoch,
                                                        transaction_version),
                                             self._offsets(producer_id, epoch, commit, partitions, coordinator_epoch))
        return data | offsets

    async def _data(self, producer_id: int, epoch: int, commit: bool, partitions, coordinator_epoch: int,
                    transaction_version: int) -> dict:
        errors: dict = {}
        replication = self.broker.visibility.replication  # cluster mode: as the leader, acks=-1
        appended: list[tuple[Any, int]] = []  # (log, the marker's offset)
        for tp in sorted(p for p in partitions if p[0] != OFFSETS_TOPIC):
            if replication is not None:
                error = replication.produce_error(tp[0], tp[1], -1)
                if error != ErrorCode.NONE:
                    errors[tp] = error
                    continue
            plog = self.broker.topics.log(*tp)
            if plog is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            current = self.broker.producers.epoch_of(tp, plog, producer_id)
            if current > epoch or (transaction_version >= 2 and current == epoch):
                errors[tp] = ErrorCode.INVALID_PRODUCER_EPOCH  # a marker of a fenced epoch (ProducerStateManager)
                continue
            last_coordinator_epoch = self.broker.producers.coordinator_epoch_of(tp, plog, producer_id)
            if last_coordinator_epoch > coordinator_epoch:
                log.info("refusing a marker for %s-%d of producer %d: coordinator epoch %d, last seen %d",
                         *tp, producer_id, coordinator_epoch, last_coordinator_epoch)
                errors[tp] = ErrorCode.TRANSACTION_COORDINATOR_FENCED
                continue
            index = self.broker.txn_index.state(plog)  # built before the append: the scan must not see it
            try:
                info = plog.append(bytearray(end_txn_marker_batch(producer_id, epoch, commit, coordinator_epoch)))
            except StorageError as exc:
                log.warning("writing a marker to %s-%d failed: %s", *tp, exc)
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            index.end(producer_id, commit, info.base_offset)
            self.broker.producers.on_marker(tp, plog, producer_id, epoch, coordinator_epoch)
            if replication is not None:
                replication.on_leader_append(*tp)
            appended.append((plog, info.last_offset))
        logs = [plog for plog, _ in appended]
        waits = []
        for (plog, last_offset), error in zip(appended, await self.broker.visibility.publish(logs), strict=True):
            tp = (plog.topic, plog.partition)
            errors[tp] = ErrorCode.NONE if error is None else ErrorCode.KAFKA_STORAGE_ERROR
            if error is None and replication is not None:
                waits.append((tp, replication.wait_acks_all(tp[0], tp[1], last_offset, MARKER_APPEND_TIMEOUT_MS)))
        for (tp, _), error in zip(waits, await asyncio.gather(*(w for _, w in waits)), strict=True):
            errors[tp] = error
        return errors

    async def _offsets(self, producer_id: int, epoch: int, commit: bool, partitions, coordinator_epoch: int) -> dict:
        tps = sorted(p for p in partitions if p[0] == OFFSETS_TOPIC)
        groups = self.broker.group_coordinator
        errors = await asyncio.gather(*(groups.complete_transaction(tp[1], producer_id, epoch, coordinator_epoch, commit)
                                        for tp in tps))
        for tp, error in zip(tps, errors, strict=True):
            if error != ErrorCode.NONE:
                log.warning("writing a marker to %s-%d failed: %s", *tp, ErrorCode(error).name)
        return dict(zip(tps, (ErrorCode(e) for e in errors), strict=True))
