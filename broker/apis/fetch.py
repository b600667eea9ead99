"""Fetch (key 1): read record batches, long-polling until min_bytes arrive or max_wait_ms passes.

Versions (we serve 4-16; magic-2 batches need v4+):
  v4: isolation_level, last_stable_offset, aborted_transactions
  v5: log_start_offset
  v6: same as v5
  v7: fetch sessions (KIP-227): session_id/epoch, forgotten topics, top-level error code
  v8: same as v7
  v9: current_leader_epoch per partition
  v10: same as v9
  v11: rack_id, preferred_read_replica
  v12: flexible; last_fetched_epoch, diverging epoch
  v13: topics by topic id (UNKNOWN_TOPIC_ID for an id we do not know)
  v14: same as v13
  v15: replica_state replaces replica_id
  v16: node endpoints (tagged, for leader changes; never needed on one node)

Fetch sessions: we refuse to create them, exactly as a Kafka broker whose session cache is full
(max.incremental.fetch.session.cache.slots=0): a request for a new session (id 0, epoch 0) gets a full
response with session_id 0, so the client keeps sending full fetches; an incremental fetch for a
session id gets FETCH_SESSION_ID_NOT_FOUND, any other epoch without a session INVALID_FETCH_SESSION_EPOCH.
There are no transactions, so read_committed sees the same data (last stable offset = high watermark).
"""
from __future__ import annotations

import time

from broker.registry import api
from protocol import messages as m
from protocol.errors import ErrorCode

FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@api(key=1, name="Fetch", min_version=4, max_version=16)
async def handle(ctx, request):
    v = ctx.api_version
    if v >= 7:
        error = _session_error(request.session_id, request.session_epoch)
        if error is not None:
            return m.FetchResponse(throttle_time_ms=0, error_code=error, session_id=0, responses=[])
    broker = ctx.broker
    plan = _resolve(broker, request.topics, v)
    wanted = [(name, p.partition) for name, _tid, parts in plan if name is not None for p in parts]
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000.0
    while True:
        responses, total = _read(broker, plan, request.max_bytes, v)
        remaining = deadline - time.monotonic()
        # A partition error answers at once, as Kafka's DelayedFetch completes on one.
        failed = any(p.error_code for t in responses for p in t.partitions)
        if total >= request.min_bytes or failed or remaining <= 0 or broker.stopping or not wanted:
            break
        if not await broker.fetch_waiters.wait(wanted, remaining):
            responses, total = _read(broker, plan, request.max_bytes, v)
            break
    for topic_resp, (name, _tid, _parts) in zip(responses, plan, strict=True):
        size = sum(len(p.records or b"") for p in topic_resp.partitions)
        if size:
            broker.metrics.inc("kcoord_fetched_bytes_total", size, topic=name)
        for p in topic_resp.partitions:
            if p.error_code:
                broker.metrics.inc("kcoord_partition_errors_total", api="Fetch", error_code=p.error_code)
    return m.FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses)


def _session_error(session_id: int, epoch: int) -> ErrorCode | None:
    if session_id != 0:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH
    return None


def _resolve(broker, topics, v: int):
    """[(topic name or None if unknown id, topic id, partitions)] in request order."""
    plan = []
    for t in topics:
        if v >= 13:
            topic = broker.topics.by_id(t.topic_id)
            plan.append((topic.name if topic is not None else None, t.topic_id, t.partitions))
        else:
            plan.append((t.topic, None, t.partitions))
    return plan


def _read(broker, plan, max_bytes: int, v: int):
    PD = m.FetchResponse.PartitionData
    responses = []
    total = 0
    for name, topic_id, parts in plan:
        out = []
        for p in parts:
            if name is None:
                out.append(_error(PD, p.partition, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            plog = broker.topics.log(name, p.partition)
            if plog is None:
                out.append(_error(PD, p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            start, end = plog.log_start_offset, plog.log_end_offset
            if not start <= p.fetch_offset <= end:
                out.append(_error(PD, p.partition, ErrorCode.OFFSET_OUT_OF_RANGE, end, start))
                continue
            records = b""
            budget = min(p.partition_max_bytes, max_bytes - total)
            if p.fetch_offset < end and (budget > 0 or total == 0):
                # Storage returns at least one whole batch; that is right only for the first data in
                # the response (KIP-74), later partitions get nothing rather than exceed their limit.
                records = plog.read(p.fetch_offset, max(budget, 1))
                if total > 0 and len(records) > budget:
                    records = b""
            total += len(records)
            out.append(PD(partition_index=p.partition, error_code=ErrorCode.NONE, high_watermark=end,
                          last_stable_offset=end, log_start_offset=start, aborted_transactions=[],
                          preferred_read_replica=-1, records=records))
        FT = m.FetchResponse.FetchableTopicResponse
        responses.append(FT(topic=name or "", topic_id=topic_id, partitions=out) if v >= 13
                         else FT(topic=name, partitions=out))
    return responses, total


def _error(PD, partition: int, code: ErrorCode, hw: int = -1, start: int = -1):
    return PD(partition_index=partition, error_code=code, high_watermark=hw, last_stable_offset=hw,
              log_start_offset=start, aborted_transactions=None, preferred_read_replica=-1, records=None)

