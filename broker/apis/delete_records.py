"""DeleteRecords (key 21): move partitions' log start offsets up (the "low watermark").

Versions (we serve 0-2):
  v0: topics / partitions with the offset to delete before, timeout
  v1: same as v0 (throttling after the response, KIP-219)
  v2: flexible
As Kafka's ReplicaManager.deleteRecords and Partition.deleteRecordsOnLeader: offset -1 means the high
watermark; an offset above the high watermark, or negative, is OFFSET_OUT_OF_RANGE; a log whose
cleanup.policy lacks "delete" answers POLICY_VIOLATION; an internal topic INVALID_TOPIC_EXCEPTION;
an unknown partition UNKNOWN_TOPIC_OR_PARTITION. An offset at or below the current start changes
nothing and answers the current start. The new start is durable before the answer (the
log-start-offset-checkpoint in log.dirs, as Kafka keeps it); ListOffsets earliest and Fetch see it at
once, the segments wholly below it go on the next retention pass. One node is every replica, so the
low watermark is known at once (no DelayedDeleteRecords).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.data.visibility import high_watermark
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.storage import StorageError

HIGH_WATERMARK = -1


@api(key=21, name="DeleteRecords", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: m.DeleteRecordsRequest):
    broker = ctx.broker
    R = m.DeleteRecordsResponse
    moved = False
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            code, low_watermark, changed = _delete(broker, t.name, p.partition_index, p.offset)
            moved |= changed
            partitions.append(R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=low_watermark, error_code=code))
        topics.append(R.DeleteRecordsTopicResult(name=t.name, partitions=partitions))
    if moved:
        try:
            broker.logs.write_log_start_checkpoint()
        except StorageError:
            for t in topics:  # the moves stand in memory, but were not made durable: say so
                for p in t.partitions:
                    p.error_code = p.error_code or ErrorCode.KAFKA_STORAGE_ERROR
    return R(throttle_time_ms=0, topics=topics)


def _delete(broker, topic_name: str, partition: int, offset: int) -> tuple[ErrorCode, int, bool]:
    """-> (error, low watermark, whether the log start moved)."""
    topic = broker.topics.get(topic_name)
    plog = broker.topics.log(topic_name, partition)
    if topic is None or plog is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, False
    if topic.internal:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, -1, False
    if not plog.config.delete:
        return ErrorCode.POLICY_VIOLATION, -1, False
    hw = high_watermark(plog)
    target = hw if offset == HIGH_WATERMARK else offset
    if target < 0 or target > hw:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1, False
    changed = plog.maybe_increment_log_start_offset(target)
    return ErrorCode.NONE, plog.log_start_offset, changed
