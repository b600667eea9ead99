"""DeleteTopics (key 20): delete topics and their partition directories.

Versions (we serve 1-6):
  v1: throttle_time_ms
  v2: same as v1
  v3: same as v2
  v4: flexible
  v5: error_message in the result
  v6: topics by name or by topic id (UNKNOWN_TOPIC_ID for an unknown id)
The internal __consumer_offsets cannot be deleted; delete.topic.enable=false gives TOPIC_DELETION_DISABLED.
"""
from __future__ import annotations

import uuid

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

ZERO_UUID = uuid.UUID(int=0)


@api(key=20, name="DeleteTopics", min_version=1, max_version=6)
async def handle(ctx: RequestContext, request: m.DeleteTopicsRequest):
    if ctx.api_version >= 6:
        targets = [(t.name, t.topic_id) for t in request.topics]
    else:
        targets = [(name, ZERO_UUID) for name in request.topic_names]
    results = [_delete(ctx.broker, name, topic_id) for name, topic_id in targets]
    return m.DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def _delete(broker, name, topic_id):
    R = m.DeleteTopicsResponse.DeletableTopicResult
    topics = broker.topics
    topic = topics.get(name) if name is not None else topics.by_id(topic_id)
    if topic is None:
        code = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return R(name=name, topic_id=topic_id, error_code=code, error_message=None)
    if not broker.config.get("delete.topic.enable"):
        return R(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                 error_message="Topic deletion is disabled.")
    if topic.internal:
        return R(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                 error_message=f"Deletion of internal topic {topic.name} is not allowed.")
    topics.delete(topic.name)
    broker.fetch_waiters.notify_topic(topic.name, topic.partitions)
    # its committed offsets go too (Kafka's GroupCoordinator.onPartitionsDeleted)
    broker.group_coordinator.handle_topics_deleted([topic.name])
    return R(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.NONE, error_message=None)
