"""Fetch (key 1): read record batches, long-polling until min_bytes arrive or max_wait_ms passes.

Versions (we serve 4-18; magic-2 batches need v4+):
  v4: isolation_level, last_stable_offset, aborted_transactions
  v5: log_start_offset
  v6: same as v5
  v7: fetch sessions (KIP-227): session_id/epoch, forgotten topics, top-level error code
  v8: same as v7
  v9: current_leader_epoch per partition (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when it is not ours)
  v10: same as v9
  v11: rack_id, preferred_read_replica
  v12: flexible; last_fetched_epoch: when the client's log diverges from ours (its epoch ends earlier
       here, or is older than ours), an empty read with diverging_epoch = (epoch, end offset) to
       truncate to, as Kafka's Partition.readRecords; an epoch we cannot place -> OFFSET_OUT_OF_RANGE
  v13: topics by topic id (UNKNOWN_TOPIC_ID for an id we do not know)
  v14: same as v13
  v15: replica_state replaces replica_id
  v16: node endpoints (tagged, for leader changes; never needed on one node)
  v17: replica directory id (KIP-853; followers only)
  v18: the follower's high watermark (KIP-1166; followers only)

Fetch sessions: we refuse to create them, exactly as a Kafka broker whose session cache is full
(max.incremental.fetch.session.cache.slots=0): a request for a new session (id 0, epoch 0) gets a full
response with session_id 0, so the client keeps sending full fetches; an incremental fetch for a
session id gets FETCH_SESSION_ID_NOT_FOUND, any other epoch without a session INVALID_FETCH_SESSION_EPOCH.
read_committed (isolation_level 1) reads below the last stable offset and gets the aborted transactions
of what it reads (KIP-98; kcoord.broker.data.txn_index); read_uncommitted reads below the high watermark.
Consumers read below the high watermark only (kcoord.broker.data.visibility: the durable offset when every
append is fsynced); an offset between it and the log end answers empty, as in Kafka. The reading and
the long poll are kcoord.broker.data.fetch_read's.
Cluster mode (kcoord.cluster.replica_manager): a Fetch from a replica (replica id >= 0, ReplicaState from
v15) is the leader's side of replication (ReplicaManager.serve_replica_fetch: the follower's state, ISR
expansion, a read to the log end, DivergingEpoch); a consumer's reads from the leader only, below the
ISR's high watermark, its current_leader_epoch checked against the leader's.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.data.fetch_read import PartitionFetch, read_when_ready, replica_id_of
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@api(key=1, name="Fetch", min_version=4, max_version=18)
async def handle(ctx: RequestContext, request: m.FetchRequest):
    v = ctx.api_version
    if v >= 7:
        error = _session_error(request.session_id, request.session_epoch)
        if error is not None:
            return m.FetchResponse(throttle_time_ms=0, error_code=error, session_id=0, responses=[])
    broker = ctx.broker
    replication = broker.visibility.replication
    if replication is not None and replica_id_of(request, v) >= 0:
        return await replication.serve_replica_fetch(request, v)
    topics = [(_topic_name(broker, t, v), t) for t in request.topics]
    wanted = [PartitionFetch(name, p.partition, p.fetch_offset, p.partition_max_bytes,
                             p.current_leader_epoch if v >= 9 else -1, p.last_fetched_epoch if v >= 12 else -1)
              for name, t in topics for p in t.partitions]
    max_bytes = request.max_bytes
    if broker.fetch_quota.active:
        allowed = broker.fetch_quota.max_value_in_window(ctx.session.principal.name, ctx.client_id or "")
        if allowed is not None:
            max_bytes = min(max_bytes, int(allowed))
    reads = iter(await read_when_ready(broker, wanted, max_bytes, request.min_bytes, request.max_wait_ms,
                                       request.isolation_level))
    FT, PD = m.FetchResponse.FetchableTopicResponse, m.FetchResponse.PartitionData
    responses = []
    for name, t in topics:
        partitions = []
        for p in t.partitions:
            r = next(reads)
            ok = r.error == ErrorCode.NONE
            partitions.append(PD(partition_index=p.partition, error_code=r.error, high_watermark=r.high_watermark,
                                 last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
                                 aborted_transactions=_aborted(r) if ok else None, preferred_read_replica=-1,
                                 records=r.records, diverging_epoch=_diverging(r)))
            _count(broker, name, r)
        responses.append(FT(topic=name or "", topic_id=t.topic_id, partitions=partitions) if v >= 13
                         else FT(topic=name, partitions=partitions))
    if broker.fetch_quota.active:
        throttle_ms = _throttle(ctx, responses)
        if throttle_ms:
            return m.FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE, session_id=0,
                                   responses=[])
    return m.FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses)


def _throttle(ctx: RequestContext, responses: list) -> int:
    """Record the answer's bytes against the consumer_byte_rate quota; when it is broken, Kafka answers an
    empty response carrying the throttle time and takes the bytes back (KafkaApis.handleFetchRequest:
    fetchContext.getThrottledResponse, quotas.fetch.unrecordQuotaSensor). Counted: the record batches."""
    size = sum(len(p.records or b"") for t in responses for p in t.partitions)
    quota, user, client_id = ctx.broker.fetch_quota, ctx.session.principal.name, ctx.client_id or ""
    throttle_ms = quota.record(user, client_id, size)
    if throttle_ms:
        quota.unrecord(user, client_id, size)
        ctx.throttle_ms = max(ctx.throttle_ms, throttle_ms)
    return throttle_ms


def _diverging(r):
    if r.diverging_epoch is None:
        return None  # not written (a tagged field)
    epoch, end_offset = r.diverging_epoch
    return m.FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end_offset)


def _aborted(r) -> list:
    AT = m.FetchResponse.AbortedTransaction
    return [AT(producer_id=pid, first_offset=first) for pid, first in (r.aborted or ())]


def _session_error(session_id: int, epoch: int) -> ErrorCode | None:
    if session_id != 0:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH
    return None


def _topic_name(broker, t, v: int) -> str | None:
    """The topic's name; by id from v13 (None for an id we do not know)."""
    if v < 13:
        return t.topic
    topic = broker.topics.by_id(t.topic_id)
    return topic.name if topic is not None else None


def _count(broker, name: str | None, r) -> None:
    if r.records:
        broker.metrics.inc("kcoord_fetched_bytes_total", len(r.records), topic=name)
    if r.error:
        broker.metrics.inc("kcoord_partition_errors_total", api="Fetch", error_code=r.error)
