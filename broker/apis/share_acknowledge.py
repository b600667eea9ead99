"""ShareAcknowledge (api key 79): KIP-932's acknowledgement of acquired records without fetching --
ACCEPT (1), RELEASE (2), REJECT (3), and from v2 RENEW (4) -- in the member's share session.

Versions:
  v0: early access in Kafka 4.0, removed in 4.1: not served
  v1: GroupId, MemberId, ShareSessionEpoch, Topics / Partitions / AcknowledgementBatches
  v2: IsRenewAck (KIP-1222); the response's AcquisitionLockTimeoutMs
Flexible from v1. As KafkaApis.handleShareAcknowledgeRequest: the session first
(SharePartitionManager.acknowledgeSessionUpdate: epoch 0 INVALID_SHARE_SESSION_EPOCH, no session
SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH, for the whole request), then each
partition's acknowledgement (SharePartition.acknowledge: INVALID_RECORD_STATE, INVALID_REQUEST;
UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION), each durable in __share_group_state before the answer.
A final request (epoch -1) then closes the session and releases what its member still holds.
"""
from __future__ import annotations

from kcoord.broker.apis.share_fetch import ack_batches, invalid_ack_types
from kcoord.broker.apis.share_version_gate import requires_share_groups
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.share.session import ShareSessionError


@api(key=79, name="ShareAcknowledge", min_version=1, max_version=2)
@requires_share_groups
async def handle(ctx: RequestContext, request: m.ShareAcknowledgeRequest):
    v = ctx.api_version
    R = m.ShareAcknowledgeResponse
    manager = ctx.broker.share_partitions
    group_id, member_id = request.group_id, request.member_id
    lock_ms = manager.lock_duration_ms(group_id) if group_id else 0

    def failed(error: ErrorCode, message: str | None):
        return R(throttle_time_ms=0, error_code=error, error_message=message, acquisition_lock_timeout_ms=0,
                 responses=[], node_endpoints=[])

    if not group_id:
        return failed(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if not member_id:
        return failed(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    try:
        closed = manager.sessions.acknowledge_context(group_id, member_id, request.share_session_epoch)
    except ShareSessionError as e:
        return failed(e.error, str(e))
    responses = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            if invalid_ack_types(p.acknowledgement_batches, v):
                error, message = ErrorCode.INVALID_REQUEST, "Acknowledge type 4 (RENEW) needs v2."
            else:
                error, message = await manager.acknowledge(group_id, member_id, t.topic_id, p.partition_index,
                                                           ack_batches(p.acknowledgement_batches))
            partitions.append(R.PartitionData(
                partition_index=p.partition_index, error_code=error, error_message=message,
                current_leader=R.LeaderIdAndEpoch(leader_id=ctx.node_id if error == ErrorCode.NONE else -1,
                                                  leader_epoch=0)))
        responses.append(R.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=partitions))
    if closed is not None:
        await manager.release_session(closed)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, acquisition_lock_timeout_ms=lock_ms,
             responses=responses, node_endpoints=[])
