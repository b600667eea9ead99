"""Produce (key 0): validate each partition's record batch, append it, answer when it is durable.

Versions (we serve 3-10; magic-2 batches need v3+):
  v3: transactional_id; record batch v2 only
  v4: same as v3 (KAFKA_STORAGE_ERROR possible)
  v5: log_start_offset in the response
  v6: same as v5
  v7: same as v6 (ZStandard allowed)
  v8: record_errors and error_message in the response (KIP-467)
  v9: flexible
  v10: current leader / node endpoints tagged fields (KIP-951; unused by a single node)
acks=0: no response; if any partition failed the connection is closed, as Kafka does, so the client
notices. acks=1/-1: the response is sent once the append is fsynced (group commit), as
log.flush.interval.messages=1 (kcoord's default) promises; only then does the high watermark cover it
(broker.data.visibility), whatever the acks. Idempotent batches (producer id >= 0) go
through the producer state: duplicates of one of the last 5 batches get their original offsets back.
"""
from __future__ import annotations

import logging
import time

from broker.connection import ProtocolViolation
from broker.data.batches import BatchRejected, validate_produce_records
from broker.registry import api
from protocol import messages as m
from protocol.errors import ErrorCode
from storage import CorruptRecordError, RecordTooLargeError, StorageError

log = logging.getLogger("kcoord.produce")

_STORAGE_ERRORS = {CorruptRecordError: ErrorCode.CORRUPT_MESSAGE, RecordTooLargeError: ErrorCode.MESSAGE_TOO_LARGE}


@api(key=0, name="Produce", min_version=3, max_version=10)
async def handle(ctx, request):
    broker = ctx.broker
    acks = request.acks
    results: list[tuple[str, list]] = []
    touched: dict[int, tuple[object, list]] = {}  # id(log) -> (log, [partition responses])
    for topic_data in request.topic_data:
        partitions = []
        results.append((topic_data.name, partitions))
        for pdata in topic_data.partition_data:
            resp, plog = _append(broker, topic_data.name, pdata, acks, request.transactional_id)
            partitions.append(resp)
            if plog is not None:
                touched.setdefault(id(plog), (plog, []))[1].append(resp)
    for _name, parts in results:
        for resp in parts:
            if resp.error_code:
                broker.metrics.inc("kcoord_partition_errors_total", api="Produce", error_code=resp.error_code)
    logs = [entry[0] for entry in touched.values()]
    if acks == 0:
        broker.visibility.publish_soon(logs)  # the partitions that took their batch
        failed = [(name, r.index, ErrorCode(r.error_code).name) for name, parts in results for r in parts
                  if r.error_code]
        if failed:
            # The client expects no answer, so Kafka closes the connection to make it notice
            # (and refresh its metadata).
            raise ProtocolViolation(f"acks=0 produce failed for {failed}")
        return None
    outcomes = await broker.visibility.publish(logs)
    for (_lg, resps), outcome in zip(touched.values(), outcomes, strict=True):
        if outcome is not None:
            for resp in resps:
                resp.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                resp.base_offset = -1
    return m.ProduceResponse(
        responses=[m.ProduceResponse.TopicProduceResponse(name=name, partition_responses=parts)
                   for name, parts in results],
        throttle_time_ms=0)


def _response(index: int, code: ErrorCode, message: str | None = None, base_offset: int = -1,
              log_start_offset: int = -1, append_time: int = -1):
    return m.ProduceResponse.PartitionProduceResponse(
        index=index, error_code=code, base_offset=base_offset, log_append_time_ms=append_time,
        log_start_offset=log_start_offset, record_errors=[], error_message=message)


def _append(broker, topic_name: str, pdata, acks: int, transactional_id):
    """(partition response, the log to fsync before answering, or None)."""
    resp = _check_and_append(broker, topic_name, pdata, acks, transactional_id)
    return resp if isinstance(resp, tuple) else (resp, None)


def _check_and_append(broker, topic_name: str, pdata, acks: int, transactional_id):
    index = pdata.index
    if acks not in (0, 1, -1):
        return _response(index, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not 0, 1 or -1")
    if transactional_id is not None:
        return _response(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                         "transactions are not supported by this broker")
    topic = broker.topics.get(topic_name)
    plog = broker.topics.log(topic_name, index)
    if topic is None or plog is None:
        return _response(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic.internal:
        return _response(index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"cannot produce to the internal topic {topic_name}")
    configs = topic.configs
    max_bytes = int(configs.get("max.message.bytes") or broker.config.get("message.max.bytes"))
    try:
        header = validate_produce_records(pdata.records, max_bytes)
    except BatchRejected as exc:
        log.info("rejected produce to %s-%d: %s", topic_name, index, exc.message)
        return _response(index, exc.code, exc.message)
    tp = (topic_name, index)
    idempotent = header.producer_id >= 0
    if idempotent:
        verdict = broker.producers.check(tp, plog, header)
        if isinstance(verdict, ErrorCode):
            return _response(index, verdict, log_start_offset=plog.log_start_offset)
        if verdict is not None:  # a retry of a batch we already have: same answer, no append
            resp = _response(index, ErrorCode.NONE, base_offset=verdict.first_offset,
                             log_start_offset=plog.log_start_offset)
            return resp, plog  # still answer only once it is durable
    batch = bytearray(pdata.records)
    started = time.perf_counter()
    try:
        info = plog.append(batch)
    except StorageError as exc:  # this partition only
        code = _STORAGE_ERRORS.get(type(exc), ErrorCode.KAFKA_STORAGE_ERROR)
        log.error("append to %s-%d failed: %s", topic_name, index, exc)
        return _response(index, code, str(exc))
    broker.metrics.storage_latency("append", time.perf_counter() - started)
    broker.metrics.inc("kcoord_produced_records_total", header.records_count, topic=topic_name)
    broker.metrics.inc("kcoord_produced_bytes_total", len(batch), topic=topic_name)
    if idempotent:
        broker.producers.record(tp, header, info.base_offset, info.last_offset, header.max_timestamp)
    # Storage stamps LogAppendTime when the topic's message.timestamp.type asks for it.
    resp = _response(index, ErrorCode.NONE, base_offset=info.base_offset,
                     log_start_offset=plog.log_start_offset, append_time=info.log_append_time_ms)
    return resp, plog
