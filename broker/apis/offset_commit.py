"""OffsetCommit (api key 8): store a group's consumed positions; answered once they are durable.

Versions (v0-v1 were removed in Kafka 4.0, KIP-896):
  v2: GenerationId and MemberId checked; RetentionTimeMs (an explicit expiry, OffsetCommitValue v1)
  v3: ThrottleTimeMs in the response
  v4: same as v3
  v5: RetentionTimeMs removed: the broker's offsets.retention.minutes applies (KIP-211)
  v6: CommittedLeaderEpoch per partition (KIP-320)
  v7: GroupInstanceId (KIP-345)
  v8: flexible encoding (KIP-482)
  v9: an unknown group answers GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION (KIP-848)
Partitions of topics (or partitions) that do not exist answer UNKNOWN_TOPIC_OR_PARTITION and are not
stored, as Kafka's request handler does before the coordinator sees the commit.
"""
from __future__ import annotations

import time

from broker.registry import api
from coordinator.results import OffsetCommitRequestPartition
from protocol import messages as m
from protocol.errors import ErrorCode

NO_RETENTION = -1


def _response(request, error_of) -> m.OffsetCommitResponse:
    topic_type = m.OffsetCommitResponse.OffsetCommitResponseTopic
    partition_type = topic_type.OffsetCommitResponsePartition
    return m.OffsetCommitResponse(topics=[
        topic_type(name=t.name, partitions=[
            partition_type(partition_index=p.partition_index, error_code=error_of(t.name, p.partition_index))
            for p in t.partitions])
        for t in request.topics])


def _exists(ctx, topic: str, partition: int) -> bool:
    known = ctx.broker.topics.get(topic)
    return known is not None and 0 <= partition < known.partitions


@api(key=8, name="OffsetCommit", min_version=2, max_version=9)
async def handle(ctx, request):
    version = ctx.api_version
    groups = ctx.broker.groups
    error = groups.group_error(request.group_id)
    if error:
        return _response(request, lambda _t, _p: error)
    offsets = [
        OffsetCommitRequestPartition(
            topic=t.name, partition=p.partition_index, offset=p.committed_offset,
            leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
            metadata=p.committed_metadata)
        for t in request.topics for p in t.partitions]
    errors = {(o.topic, o.partition): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
              for o in offsets if not _exists(ctx, o.topic, o.partition)}
    offsets = [o for o in offsets if (o.topic, o.partition) not in errors]
    if offsets or not errors:
        started = time.monotonic()
        errors.update(await groups.call(
            "handle_commit_offsets",
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id if version >= 7 else None,
            generation_id=request.generation_id_or_member_epoch,
            retention_time_ms=request.retention_time_ms if version <= 4 else NO_RETENTION,
            offsets=offsets,
            request_version=version,
        ))
        ctx.broker.metrics.commit_latency(time.monotonic() - started)  # request to durable answer
    return _response(request, lambda t, p: errors[(t, p)])
