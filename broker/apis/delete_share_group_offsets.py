"""DeleteShareGroupOffsets (api key 92): KIP-932's removal of a share group's state for whole topics
(`kafka-share-groups.sh --delete-offsets`, Admin.deleteShareGroupOffsets).

Versions:
  v0: GroupId, Topics (names); the response's top-level ErrorCode, ErrorMessage and per topic ErrorCode,
      ErrorMessage
Flexible from v0. As GroupCoordinatorService.deleteShareGroupOffsets: only an empty share group
(NON_EMPTY_GROUP), an unknown group or another type's id GROUP_ID_NOT_FOUND (top-level); a topic this
node does not know UNKNOWN_TOPIC_OR_PARTITION. The share-partitions' state is deleted with a tombstone
in __share_group_state; a later ShareFetch starts them again from share.auto.offset.reset.
"""
from __future__ import annotations

from kcoord.broker.apis.alter_share_group_offsets import empty_share_group_error
from kcoord.broker.apis.share_version_gate import requires_share_groups
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.schema import ZERO_UUID


@api(key=92, name="DeleteShareGroupOffsets", min_version=0, max_version=0)
@requires_share_groups
async def handle(ctx: RequestContext, request: m.DeleteShareGroupOffsetsRequest):
    R = m.DeleteShareGroupOffsetsResponse
    error, message = empty_share_group_error(ctx, request.group_id)
    if error != ErrorCode.NONE:
        return R(throttle_time_ms=0, error_code=error, error_message=message, responses=[])
    broker = ctx.broker
    responses = []
    for t in request.topics:
        topic = broker.topics.get(t.topic_name)
        if topic is None:
            responses.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=ZERO_UUID, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                error_message="This server does not host this topic."))
            continue
        code = ErrorCode.NONE
        for partition in range(topic.partitions):
            result = await broker.share_partitions.delete(request.group_id, topic.topic_id, partition)
            code = code if result == ErrorCode.NONE else result
        responses.append(R.DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=topic.topic_id,
                                                                error_code=code, error_message=None))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=responses)
