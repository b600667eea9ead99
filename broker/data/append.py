"""Appending one partition's record batch for Produce: the topic checks, batch validation, producer
state for idempotent batches (duplicates get their original offsets, no append), the append itself.

Nothing here waits for the fsync: the handler publishes every touched log at once afterwards
(kcoord.broker.data.visibility), so one group commit covers the whole request.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from kcoord.broker.data.batches import BatchRejected, validate_produce_records
from kcoord.protocol.errors import ErrorCode
from kcoord.storage import CorruptRecordError, RecordTooLargeError, StorageError

log = logging.getLogger("kcoord.produce")

_STORAGE_ERRORS = {CorruptRecordError: ErrorCode.CORRUPT_MESSAGE, RecordTooLargeError: ErrorCode.MESSAGE_TOO_LARGE}


@dataclass(slots=True)
class Appended:
    error: ErrorCode
    message: str | None = None
    base_offset: int = -1
    log_start_offset: int = -1
    log_append_time_ms: int = -1
    log: Any = None  # the PartitionLog to publish before answering (None: nothing was taken)
    last_offset: int = -1  # the batch's last offset (cluster mode: what acks=all waits for)


def append_partition(broker: Any, topic_name: str, index: int, records: Any,
                     transactional_id: str | None = None, verified: dict | None = None) -> Appended:
    """`verified`: the coordinator's verification answers per partition when it was asked on another node
    (cluster mode, kcoord.broker.data.txn_verification); None asks the coordinator in this process."""
    topic = broker.topics.get(topic_name)
    plog = broker.topics.log(topic_name, index)
    if topic is None or plog is None:
        return Appended(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic.internal:
        return Appended(ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot produce to the internal topic {topic_name}")
    max_bytes = int(topic.configs.get("max.message.bytes") or broker.config.get("message.max.bytes"))
    try:
        header = validate_produce_records(records, max_bytes)
    except BatchRejected as exc:
        log.info("rejected produce to %s-%d: %s", topic_name, index, exc.message)
        return Appended(exc.code, exc.message)
    tp = (topic_name, index)
    idempotent = header.producer_id >= 0
    if header.is_transactional:
        refused = verify_transactional(broker, transactional_id, tp, header, verified)
        if refused is not None:
            return Appended(refused, log_start_offset=plog.log_start_offset)
    if idempotent:
        verdict = broker.producers.check(tp, plog, header)
        if isinstance(verdict, ErrorCode):
            return Appended(verdict, log_start_offset=plog.log_start_offset)
        if verdict is not None:  # a retry of a batch we already have: same answer, no append,
            return Appended(ErrorCode.NONE, base_offset=verdict.first_offset,  # but still only once durable
                            log_start_offset=plog.log_start_offset, log=plog, last_offset=verdict.last_offset)
    batch = bytearray(records)
    started = time.perf_counter()
    try:
        info = plog.append(batch)
    except StorageError as exc:  # this partition only
        log.error("append to %s-%d failed: %s", topic_name, index, exc)
        return Appended(_STORAGE_ERRORS.get(type(exc), ErrorCode.KAFKA_STORAGE_ERROR), str(exc))
    broker.metrics.storage_latency("append", time.perf_counter() - started)
    broker.metrics.inc("kcoord_produced_records_total", header.records_count, topic=topic_name)
    broker.metrics.inc("kcoord_produced_bytes_total", len(batch), topic=topic_name)
    if idempotent:
        broker.producers.record(tp, header, info.base_offset, info.last_offset, header.max_timestamp)
    if header.is_transactional:
        broker.txn_index.on_append(plog, header.producer_id, info.base_offset)
    # Storage stamps LogAppendTime when the topic's message.timestamp.type asks for it.
    return Appended(ErrorCode.NONE, base_offset=info.base_offset, log_start_offset=plog.log_start_offset,
                    log_append_time_ms=info.log_append_time_ms, log=plog, last_offset=info.last_offset)


# What a failed verification answers a producer (ReplicaManager.appendRecords' postVerificationCallback and
# AddPartitionsToTxnManager): retriable coordinator errors become NOT_ENOUGH_REPLICAS, which clients retry.
_VERIFY_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTION_ABORTABLE: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
}


def verify_transactional(broker: Any, transactional_id: str | None, tp: tuple[str, int], header: Any,
                         verified: dict | None = None) -> ErrorCode | None:
    """KIP-890 verification: a transactional batch is taken only if its partition is in the producer's
    ongoing transaction, at its current epoch (None: take it)."""
    if transactional_id is None:
        return ErrorCode.INVALID_TXN_STATE
    if verified is not None and tp in verified:
        error = verified[tp]
    else:
        error = broker.txn_coordinator.coordinator.verify_partitions(transactional_id, header.producer_id,
                                                                     header.producer_epoch, [tp])[tp]
    if error == ErrorCode.NONE:
        return None
    return _VERIFY_ERRORS.get(error, error)
