"""ListOffsets (key 2): the offset for a timestamp, or the earliest / latest / max-timestamp offset.

Versions (we serve 1-7):
  v1: one offset per partition (v0's old_style_offsets array is gone), timestamp in the response
  v2: isolation_level: read_committed sees offsets below the last stable offset only (KIP-98)
  v3: same as v2
  v4: current_leader_epoch in the request, leader_epoch in the response
  v5: same as v4
  v6: flexible
  v7: timestamp -3 = the offset of the record with the largest timestamp (KIP-734)
Special timestamps: -2 earliest (log start offset), -1 latest (the high watermark), -3 max timestamp.
Like Kafka's answer to a consumer, nothing at or above the high watermark is ever returned
(broker.data.visibility: with fsync-per-append that is the durable offset, not the log end).
"""
from __future__ import annotations

from broker.data.visibility import high_watermark
from broker.registry import api
from protocol import messages as m
from protocol.errors import ErrorCode

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
LEADER_EPOCH = 0


@api(key=2, name="ListOffsets", min_version=1, max_version=7)
async def handle(ctx, request):
    R = m.ListOffsetsResponse
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, offset, timestamp = _lookup(ctx.broker, t.name, p.partition_index, p.timestamp, ctx.api_version,
                                              request.isolation_level if ctx.api_version >= 2 else 0)
            parts.append(R.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=code, timestamp=timestamp, offset=offset,
                leader_epoch=LEADER_EPOCH if code == ErrorCode.NONE else -1))
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def _lookup(broker, topic: str, partition: int, timestamp: int, version: int,
            isolation_level: int = 0) -> tuple[ErrorCode, int, int]:
    plog = broker.topics.log(topic, partition)
    if plog is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
    if timestamp == EARLIEST:
        return ErrorCode.NONE, plog.log_start_offset, -1
    # Kafka's lastFetchableOffset: the last stable offset for read_committed, else the high watermark.
    hw = broker.txn_index.last_stable_offset(plog) if isolation_level == 1 else high_watermark(plog)
    if timestamp == LATEST:
        return ErrorCode.NONE, hw, -1
    if timestamp < 0 and not (timestamp == MAX_TIMESTAMP and version >= 7):
        return ErrorCode.UNSUPPORTED_VERSION, -1, -1
    found = plog.offset_for_timestamp(timestamp)  # storage also knows MAX_TIMESTAMP
    if found is None or found[0] >= hw:  # as Kafka: only an offset a consumer can fetch
        return ErrorCode.NONE, -1, -1
    offset, ts = found
    return ErrorCode.NONE, offset, ts
