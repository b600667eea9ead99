"""DescribeShareGroupOffsets (api key 90): KIP-932's offsets of a share group -- per share-partition its
start offset (the share-partition start offset, SPSO), leader epoch and lag; what
`kafka-share-groups.sh --describe` and Admin.listShareGroupOffsets show.

Versions:
  v0: GroupId, Topics (null: every share-partition of the group with state); per partition
      StartOffset, LeaderEpoch, ErrorCode, ErrorMessage
  v1: Lag (KIP-1226): the records from the start offset to the high watermark not yet acknowledged or
      archived (high watermark - start offset - delivered-complete count)
Flexible from v0. As GroupCoordinatorService.describeShareGroupOffsets: an unknown group or a classic or
consumer group's id GROUP_ID_NOT_FOUND for the group; a partition without share state StartOffset -1
(lag -1); a topic this node does not know UNKNOWN_TOPIC_OR_PARTITION for its partitions.
In a cluster the share-partitions' state is the share coordinators' (issue #28): each is asked with
ReadShareGroupStateSummary (persister.summary, as describeShareGroupOffsets asks its persister); the group's
share-partitions are those of its members' subscribed topics and the ones this node serves. The lag is
computed against this node's replica of the partition (-1 without one).
"""
from __future__ import annotations

from kcoord.broker.apis.share_version_gate import requires_share_groups
from kcoord.broker.context import RequestContext
from kcoord.broker.data.visibility import high_watermark
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.schema import ZERO_UUID
from kcoord.share.partition import TERMINAL


@api(key=90, name="DescribeShareGroupOffsets", min_version=0, max_version=1)
@requires_share_groups
async def handle(ctx: RequestContext, request: m.DescribeShareGroupOffsetsRequest):
    R = m.DescribeShareGroupOffsetsResponse
    broker = ctx.broker
    manager = broker.share_partitions
    service = broker.group_coordinator.service
    out = []
    for g in request.groups:
        if service is None:
            out.append(R.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=None))
            continue
        ((_gid, error, message, group),) = service.share_group_describe([g.group_id])
        if group is None:
            out.append(R.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=[], error_code=error,
                                                                 error_message=message))
            continue
        if g.topics is None:
            wanted: dict[str, list[int]] = {}
            for topic_id, partition in manager.partitions_of(g.group_id):
                topic = broker.topics.by_id(topic_id)
                if topic is not None:
                    wanted.setdefault(topic.name, []).append(partition)
            if manager.persister is not None:  # cluster mode: the subscribed topics' share-partitions too
                for name in sorted(group.subscribed_topics()):
                    topic = broker.topics.get(name)
                    if topic is not None:
                        wanted[name] = sorted(set(wanted.get(name, [])) | set(range(topic.partitions)))
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        topics = []
        for name, partitions in wanted.items():
            topic = broker.topics.get(name)
            rows = []
            for p in partitions:
                if topic is None or not 0 <= p < topic.partitions:
                    rows.append(R.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message="This server does not host this topic-partition."))
                    continue
                if manager.persister is not None:
                    rows.append(await _summary_row(ctx, g.group_id, topic.topic_id, name, p))
                    continue
                sp = manager.get(g.group_id, topic.topic_id, p)
                if sp is None:
                    rows.append(R.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1, error_code=ErrorCode.NONE,
                        error_message=None))
                    continue
                plog = broker.logs.get(name, p)
                complete = sum(1 for o, view in sp.in_flight().items() if o >= sp.start_offset and view[0] in TERMINAL)
                lag = -1 if plog is None else max(high_watermark(plog) - sp.start_offset - complete, 0)
                rows.append(R.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=sp.start_offset, leader_epoch=sp.leader_epoch, lag=lag,
                    error_code=ErrorCode.NONE, error_message=None))
            topics.append(R.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic.topic_id if topic is not None else ZERO_UUID, partitions=rows))
        out.append(R.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=topics,
                                                             error_code=ErrorCode.NONE, error_message=None))
    return R(throttle_time_ms=0, groups=out)


async def _summary_row(ctx: RequestContext, group_id: str, topic_id, name: str, partition: int):
    """Cluster mode: one share-partition's row from its share coordinator's summary."""
    R = m.DescribeShareGroupOffsetsResponse
    persister = ctx.broker.share_partitions.persister
    assert persister is not None
    error, summary = await persister.summary((group_id, topic_id, partition))
    if error != ErrorCode.NONE or summary is None:
        return R.DescribeShareGroupOffsetsResponsePartition(
            partition_index=partition, start_offset=-1, leader_epoch=-1, lag=-1, error_code=error, error_message=None)
    start, leader_epoch, complete = summary
    plog = ctx.broker.logs.get(name, partition)
    lag = -1 if plog is None or complete < 0 else max(high_watermark(plog) - start - complete, 0)
    return R.DescribeShareGroupOffsetsResponsePartition(
        partition_index=partition, start_offset=start, leader_epoch=leader_epoch, lag=lag, error_code=ErrorCode.NONE,
        error_message=None)
