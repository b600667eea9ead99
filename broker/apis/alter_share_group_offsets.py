"""AlterShareGroupOffsets (api key 91): KIP-932's reset of a share group's share-partitions to a start
offset (`kafka-share-groups.sh --reset-offsets`, Admin.alterShareGroupOffsets).

Versions:
  v0: GroupId, Topics / Partitions / StartOffset; the response's top-level ErrorCode, ErrorMessage and per
      partition ErrorCode, ErrorMessage
Flexible from v0. As GroupCoordinatorService.alterShareGroupOffsets: only an empty share group may be
altered (NON_EMPTY_GROUP), an unknown group or a classic or consumer group's id GROUP_ID_NOT_FOUND (both
top-level); per partition UNKNOWN_TOPIC_OR_PARTITION for a topic or partition this node does not have,
INVALID_REQUEST for a negative offset. Each reset share-partition starts over at its offset with nothing
in flight, at its next state epoch, written to __share_group_state before the answer.
"""
from __future__ import annotations

from kcoord.broker.apis.share_version_gate import requires_share_groups
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.schema import ZERO_UUID


def empty_share_group_error(ctx: RequestContext, group_id: str) -> tuple[ErrorCode, str | None]:
    """NONE for an existing share group without members; else the error the admin APIs answer."""
    service = ctx.broker.group_coordinator.service
    if service is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    ((_gid, error, message, group),) = service.share_group_describe([group_id])
    if group is None:
        return error, message
    if group.members:
        return ErrorCode.NON_EMPTY_GROUP, f"The group {group_id} has members; only an empty share group can be altered."
    return ErrorCode.NONE, None


@api(key=91, name="AlterShareGroupOffsets", min_version=0, max_version=0)
@requires_share_groups
async def handle(ctx: RequestContext, request: m.AlterShareGroupOffsetsRequest):
    R = m.AlterShareGroupOffsetsResponse
    error, message = empty_share_group_error(ctx, request.group_id)
    if error != ErrorCode.NONE:
        return R(throttle_time_ms=0, error_code=error, error_message=message, responses=[])
    broker = ctx.broker
    responses = []
    for t in request.topics:
        topic = broker.topics.get(t.topic_name)
        rows = []
        for p in t.partitions:
            if topic is None or not 0 <= p.partition_index < topic.partitions:
                code, text = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            elif p.start_offset < 0:
                code, text = ErrorCode.INVALID_REQUEST, f"Invalid start offset {p.start_offset}."
            else:
                code = await broker.share_partitions.reset(request.group_id, topic.topic_id, p.partition_index,
                                                           p.start_offset)
                text = None
            rows.append(R.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index, error_code=code,
                                                                   error_message=text))
        responses.append(R.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else ZERO_UUID, partitions=rows))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=responses)
