"""OffsetForLeaderEpoch (key 23): where a leader epoch ended in a partition's log, so a consumer can tell
whether the log was truncated under its position (KIP-320) and a follower where to truncate.

Versions (we serve 2-4, as Kafka 4.2; v0-1 were removed in 4.0):
  v2: current_leader_epoch in the request (fencing), leader_epoch in the response
  v3: replica_id (-1 for consumers)
  v4: flexible
Per partition, as Kafka's Partition.lastOffsetForLeaderEpoch: unknown -> UNKNOWN_TOPIC_OR_PARTITION;
a current_leader_epoch below the partition's epoch -> FENCED_LEADER_EPOCH, above it ->
UNKNOWN_LEADER_EPOCH (-1 skips the check); else the epoch cache's answer (kcoord.storage.leader_epochs:
the latest epoch ends at the log end, an earlier one where the next begins, -1/-1 when unknown).
Cluster mode: the replica's state answers (ReplicaManager.lastOffsetForLeaderEpoch): a consumer's request
needs the leader, a follower's (replica_id >= 0) may be answered by any replica.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.data.fetch_read import leader_epoch_error
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

NO_EPOCH = -1


@api(key=23, name="OffsetForLeaderEpoch", min_version=2, max_version=4)
async def handle(ctx: RequestContext, request: m.OffsetForLeaderEpochRequest):
    R = m.OffsetForLeaderEpochResponse
    replication = ctx.broker.visibility.replication
    replica_id = request.replica_id if ctx.api_version >= 3 else -1
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            if replication is None:
                code, epoch, end = _end_offset(ctx.broker, t.topic, p.partition, p.current_leader_epoch,
                                               p.leader_epoch)
            else:
                code, epoch, end = replication.offset_for_leader_epoch(t.topic, p.partition, p.current_leader_epoch,
                                                                       p.leader_epoch, replica_id)
            partitions.append(R.OffsetForLeaderTopicResult.EpochEndOffset(
                error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(R.OffsetForLeaderTopicResult(topic=t.topic, partitions=partitions))
    return R(throttle_time_ms=0, topics=topics)


def _end_offset(broker, topic: str, partition: int, current_epoch: int, epoch: int) -> tuple[ErrorCode, int, int]:
    plog = broker.topics.log(topic, partition)
    if plog is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_EPOCH, -1
    fenced = leader_epoch_error(plog, current_epoch)
    if fenced:
        return fenced, NO_EPOCH, -1
    found_epoch, end = plog.end_offset_for_epoch(epoch)
    return ErrorCode.NONE, found_epoch, end
