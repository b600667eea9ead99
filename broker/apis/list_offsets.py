"""ListOffsets (key 2): the offset for a timestamp, or the earliest / latest / max-timestamp offset.

Versions (we serve 1-11):
  v1: one offset per partition (v0's old_style_offsets array is gone), timestamp in the response
  v2: isolation_level: read_committed sees offsets below the last stable offset only (KIP-98)
  v3: same as v2
  v4: current_leader_epoch in the request (fencing, as Fetch), leader_epoch in the response
  v5: same as v4
  v6: flexible
  v7: timestamp -3 = the offset of the record with the largest timestamp (KIP-734)
  v8: timestamp -4 = the earliest offset in local storage (KIP-405): the log start, nothing is tiered
  v9: timestamp -5 = the last offset in tiered storage (KIP-1005): none here, -1
  v10: timeout_ms (KIP-1075, for remote lookups; ours never wait)
  v11: timestamp -6 = the earliest offset pending upload to tiered storage (KIP-1023): none here, -1
Special timestamps: -2 earliest (log start offset), -1 latest (the high watermark), -3 max timestamp;
one a version does not know is UNSUPPORTED_VERSION, as Kafka answers it.
Like Kafka's answer to a consumer, nothing at or above the high watermark is ever returned
(kcoord.broker.data.visibility: with fsync-per-append that is the durable offset, not the log end).
Cluster mode: only the partition's leader answers (NOT_LEADER_OR_FOLLOWER elsewhere, FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH against its leader epoch), and the high watermark is the ISR's.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.data.fetch_read import leader_epoch_error
from kcoord.broker.data.visibility import high_watermark
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
# The first version that knows each special timestamp.
SPECIAL_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                 EARLIEST_PENDING_UPLOAD: 11}


@api(key=2, name="ListOffsets", min_version=1, max_version=11)
async def handle(ctx: RequestContext, request: m.ListOffsetsRequest):
    R = m.ListOffsetsResponse
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, offset, timestamp = _lookup(ctx.broker, t.name, p.partition_index, p.timestamp, ctx.api_version,
                                              p.current_leader_epoch if ctx.api_version >= 4 else -1,
                                              request.isolation_level if ctx.api_version >= 2 else 0)
            parts.append(R.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=code, timestamp=timestamp, offset=offset,
                leader_epoch=_epoch(ctx.broker, t.name, p.partition_index, code, offset)))
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def _epoch(broker, topic: str, partition: int, code: ErrorCode, offset: int) -> int:
    """The epoch of the record at `offset` (the current one at the log end), as Kafka's
    UnifiedLog.fetchOffsetByTimestamp reports it; -1 with an error or no offset."""
    if code != ErrorCode.NONE or offset < 0:
        return -1
    plog = broker.topics.log(topic, partition)
    if offset >= plog.log_end_offset:
        return plog.leader_epoch
    return plog.leader_epochs.epoch_for_offset(offset)


def _lookup(broker, topic: str, partition: int, timestamp: int, version: int,
            current_leader_epoch: int, isolation_level: int = 0) -> tuple[ErrorCode, int, int]:
    plog = broker.topics.log(topic, partition)
    replication = broker.visibility.replication
    if plog is None:
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if replication is None else \
            replication.not_held_error(topic, partition)
        return error, -1, -1
    if replication is None:
        fenced, high = leader_epoch_error(plog, current_leader_epoch), high_watermark(plog)
    else:  # cluster mode: only the leader answers (fetchOnlyFromLeader), with the ISR's high watermark
        fenced, high = replication.consumer_fetch_bounds(topic, partition, current_leader_epoch,
                                                         high_watermark(plog))
    if fenced:
        return fenced, -1, -1
    if timestamp < 0 and version < SPECIAL_SINCE.get(timestamp, 1 << 15):
        return ErrorCode.UNSUPPORTED_VERSION, -1, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):  # no tiered storage: the local log is the whole log
        return ErrorCode.NONE, plog.log_start_offset, -1
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # nothing is tiered or waiting to be
        return ErrorCode.NONE, -1, -1
    # Kafka's lastFetchableOffset: the last stable offset for read_committed, else the high watermark.
    hw = min(broker.txn_index.last_stable_offset(plog), high) if isolation_level == 1 else high
    if timestamp == LATEST:
        return ErrorCode.NONE, hw, -1
    found = plog.offset_for_timestamp(timestamp)  # storage also knows MAX_TIMESTAMP
    if found is None or found[0] >= hw:  # as Kafka: only an offset a consumer can fetch
        return ErrorCode.NONE, -1, -1
    offset, ts = found
    return ErrorCode.NONE, offset, ts
