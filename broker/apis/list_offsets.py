"""ListOffsets (key 2): the offset for a timestamp, or the earliest / latest / max-timestamp offset.

Versions (we serve 1-7):
  v1: one offset per partition (v0's old_style_offsets array is gone), timestamp in the response
  v2: isolation_level (read_committed sees the same offsets here: no transactions)
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
from protocol.records import LOG_APPEND_TIME, decode_records, iter_batches

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
LEADER_EPOCH = 0
_SCAN_READ_BYTES = 1 << 20


@api(key=2, name="ListOffsets", min_version=1, max_version=7)
async def handle(ctx, request):
    R = m.ListOffsetsResponse
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, offset, timestamp = _lookup(ctx.broker, t.name, p.partition_index, p.timestamp, ctx.api_version)
            parts.append(R.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=code, timestamp=timestamp, offset=offset,
                leader_epoch=LEADER_EPOCH if code == ErrorCode.NONE else -1))
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def _lookup(broker, topic: str, partition: int, timestamp: int, version: int) -> tuple[ErrorCode, int, int]:
    plog = broker.topics.log(topic, partition)
    if plog is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
    if timestamp == EARLIEST:
        return ErrorCode.NONE, plog.log_start_offset, -1
    hw = high_watermark(plog)
    if timestamp == LATEST:
        return ErrorCode.NONE, hw, -1
    if timestamp == MAX_TIMESTAMP and version >= 7:
        found = _max_timestamp(plog, hw)
        return (ErrorCode.NONE, *found) if found else (ErrorCode.NONE, -1, -1)
    if timestamp < 0:
        return ErrorCode.UNSUPPORTED_VERSION, -1, -1
    found = plog.offset_for_timestamp(timestamp)
    if found is None or found[0] >= hw:
        return ErrorCode.NONE, -1, -1
    offset, ts = found
    return ErrorCode.NONE, offset, ts


def _max_timestamp(plog, hw: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record below `hw` carrying the partition's largest timestamp."""
    best = None  # (max_timestamp, batch bytes, header)
    offset = plog.log_start_offset
    while offset < hw:
        data = plog.read(offset, _SCAN_READ_BYTES, max_offset=hw)
        moved = False
        for _pos, header, batch in iter_batches(data):
            if header.next_offset <= offset:
                continue
            if header.records_count and (best is None or header.max_timestamp > best[0]):
                best = (header.max_timestamp, bytes(batch), header)
            offset = header.next_offset
            moved = True
        if not moved:
            break
    if best is None:
        return None
    max_ts, batch, header = best
    if header.timestamp_type == LOG_APPEND_TIME:
        return header.base_offset, max_ts
    for record in decode_records(batch):
        if record.timestamp == max_ts:
            return record.offset, max_ts
    return header.last_offset, max_ts
