"""ShareFetch (api key 78): KIP-932's fetch for share groups -- records acquired for the member, with
acknowledgements of earlier ones piggybacked, in a share session (kcoord.share.session).

Versions:
  v0: early access in Kafka 4.0 (PartitionMaxBytes per partition), removed in 4.1: not served
  v1: MaxRecords, BatchSize; the response's AcquisitionLockTimeoutMs
  v2: ShareAcquireMode (KIP-1206: 0 batch_optimized, 1 record_limit -- exactly MaxRecords) and IsRenewAck
      (KIP-1222: acknowledge type 4 RENEW extends locks; such a request fetches nothing and must say so
      with zero MaxWaitMs, MinBytes, MaxBytes and MaxRecords)
Flexible from v1. As KafkaApis.handleShareFetchRequest: the session first (INVALID_REQUEST,
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED answer the whole
request, SharePartitionManager.newContext), then the acknowledgements (AcknowledgeErrorCode per
partition: INVALID_RECORD_STATE, INVALID_REQUEST, SharePartition.acknowledge), then the fetch (ErrorCode
per partition: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION). A final request (epoch -1) acknowledges,
closes the session and releases what its member still holds; kcoord takes its partitions without
acknowledgements as the partitions it would fetch (INVALID_REQUEST). A new session's response lists
every partition; a later one only those with records, an error or an acknowledgement.
"""
from __future__ import annotations

from kcoord.broker.apis.share_version_gate import requires_share_groups
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.share.manager import PartitionFetch
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.share.partition import RENEW
from kcoord.share.session import FINAL_EPOCH, ShareSessionError

BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1
DEFAULT_MAX_RECORDS = 500  # a v1 request asking for 0 or fewer records: the Java client's max.poll.records


def invalid_ack_types(batches, version: int) -> bool:
    """RENEW (4) exists from v2 only; the types themselves are checked by SharePartition.acknowledge."""
    return version < 2 and any(RENEW in b.acknowledge_types for b in batches)


def ack_batches(batches) -> list:
    return [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches]


@api(key=78, name="ShareFetch", min_version=1, max_version=2)
@requires_share_groups
async def handle(ctx: RequestContext, request: m.ShareFetchRequest):
    v = ctx.api_version
    R = m.ShareFetchResponse
    manager = ctx.broker.share_partitions

    def failed(error: ErrorCode, message: str | None):
        return R(throttle_time_ms=0, error_code=error, error_message=message, acquisition_lock_timeout_ms=0,
                 responses=[], node_endpoints=[])

    group_id, member_id = request.group_id, request.member_id
    if not group_id:
        return failed(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if not member_id:
        return failed(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    renew = v >= 2 and request.is_renew_ack
    if renew and (request.max_wait_ms or request.min_bytes or request.max_bytes or request.max_records):
        return failed(ErrorCode.INVALID_REQUEST, "A renew acknowledgement request fetches nothing.")
    if v >= 2 and request.share_acquire_mode not in (BATCH_OPTIMIZED, RECORD_LIMIT):
        return failed(ErrorCode.INVALID_REQUEST, f"Unknown ShareAcquireMode {request.share_acquire_mode}.")
    epoch = request.share_session_epoch
    acks = {(t.topic_id, p.partition_index): p.acknowledgement_batches
            for t in request.topics for p in t.partitions if p.acknowledgement_batches}
    named = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    fetch = [] if renew else [tp for tp in named if epoch != FINAL_EPOCH or tp not in acks]
    forget = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    try:
        context = manager.sessions.fetch_context(group_id, member_id, epoch, fetch, forget, bool(acks),
                                                 ctx.connection_id)
    except ShareSessionError as e:
        return failed(e.error, str(e))
    if context.released is not None and context.session is not None:  # a new session replaced the old one
        await manager.release_session(context.released)

    acked: dict[tuple, tuple[ErrorCode, str | None]] = {}
    for (topic_id, partition), batches in acks.items():
        if invalid_ack_types(batches, v):
            acked[(topic_id, partition)] = ErrorCode.INVALID_REQUEST, "Acknowledge type 4 (RENEW) needs v2."
            continue
        acked[(topic_id, partition)] = await manager.acknowledge(group_id, member_id, topic_id, partition,
                                                                 ack_batches(batches))
    fetched: dict[tuple, PartitionFetch] = {}
    if context.session is None:  # final: the session is closed, what its member holds goes back
        await manager.release_session(context.released)
    elif not renew:
        max_records = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS
        strict = v >= 2 and request.share_acquire_mode == RECORD_LIMIT
        fetched = await manager.fetch(group_id, member_id, list(context.session.partitions), max_records,
                                      request.max_bytes, 0 if acks else request.max_wait_ms, strict)

    listed = list(context.session.partitions) if context.full and context.session is not None else []
    listed += [tp for tp in fetched if tp not in listed and (fetched[tp].acquired or fetched[tp].error)]
    listed += [tp for tp in acked if tp not in listed]
    by_topic: dict = {}
    for topic_id, partition in listed:
        f = fetched.get((topic_id, partition)) or PartitionFetch()
        ack_error, ack_message = acked.get((topic_id, partition), (ErrorCode.NONE, None))
        by_topic.setdefault(topic_id, []).append(R.PartitionData(
            partition_index=partition, error_code=f.error, error_message=f.message,
            acknowledge_error_code=ack_error, acknowledge_error_message=ack_message,
            current_leader=R.LeaderIdAndEpoch(leader_id=ctx.node_id if f.error == ErrorCode.NONE else -1,
                                              leader_epoch=f.leader_epoch),
            records=f.records if f.records is not None else b"",
            acquired_records=[R.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                delivery_count=a.delivery_count) for a in f.acquired]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             acquisition_lock_timeout_ms=manager.lock_duration_ms(group_id),
             responses=[R.ShareFetchableTopicResponse(topic_id=t, partitions=parts) for t, parts in by_topic.items()],
             node_endpoints=[])
