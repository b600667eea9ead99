"""DeleteTopics (key 20): delete topics and their partition directories.

Versions (we serve 1-6):
  v1: throttle_time_ms
  v2: same as v1
  v3: same as v2
  v4: flexible
  v5: error_message in the result
  v6: topics by name or by topic id (UNKNOWN_TOPIC_ID for an unknown id)
The internal __consumer_offsets cannot be deleted; delete.topic.enable=false gives TOPIC_DELETION_DISABLED.
Cluster mode: the active controller deletes the topic key and its partition keys in one txn behind its
epoch compare (ReplicationControlManager.deleteTopics); every replica's metadata diff then says
StopReplica and the replica layer drops the partition. Names and ids are resolved in the controller's
image; any other node answers NOT_CONTROLLER (clients send DeleteTopics to the controller).
controller_mutation_rate (KIP-599, broker/controller_mutation_quota.py) charges a topic's partition count
after the checks above (ReplicationControlManager.deleteTopic); from v5 a topic above it gets
THROTTLING_QUOTA_EXCEEDED, before v5 the quota only throttles the response.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kcoord.broker.context import RequestContext
from kcoord.broker.controller_mutation_quota import (
    THROTTLED_MESSAGE,
    MutationQuota,
    quota_for_request,
    throttle_response,
)
from kcoord.broker.registry import api
from kcoord.metadata.topics import CONSUMER_OFFSETS, TRANSACTION_STATE
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kcoord.cluster.node import ClusterNode

ZERO_UUID = uuid.UUID(int=0)


@api(key=20, name="DeleteTopics", min_version=1, max_version=6)
async def handle(ctx: RequestContext, request: m.DeleteTopicsRequest):
    if ctx.api_version >= 6:
        targets = [(t.name, t.topic_id) for t in request.topics]
    else:
        targets = [(name, ZERO_UUID) for name in request.topic_names]
    quota = quota_for_request(ctx, "DeleteTopics")
    if ctx.broker.cluster is not None:
        results = [await _delete_in_cluster(ctx.broker, ctx.broker.cluster, name, topic_id, quota)
                   for name, topic_id in targets]
    else:
        results = [_delete(ctx.broker, name, topic_id, quota) for name, topic_id in targets]
    return m.DeleteTopicsResponse(throttle_time_ms=throttle_response(ctx, quota), responses=results)


async def _delete_in_cluster(broker, cluster: ClusterNode, name: str | None, topic_id: uuid.UUID,
                             quota: MutationQuota):
    R = m.DeleteTopicsResponse.DeletableTopicResult
    controller = cluster.active_controller
    if controller is None:
        return R(name=name, topic_id=topic_id, error_code=ErrorCode.NOT_CONTROLLER,
                 error_message=f"This node ({cluster.node_id}) is not the controller.")
    image = controller.image
    if name is None:
        name = next((n for n, t in image.topics.items() if t.info is not None and t.info.topic_id == topic_id), None)
        if name is None:
            return R(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID, error_message=None)
    topic = image.topics.get(name)
    if topic is None or topic.info is None:
        return R(name=name, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=None)
    tid = topic.info.topic_id
    if not broker.config.get("delete.topic.enable"):
        return R(name=name, topic_id=tid, error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                 error_message="Topic deletion is disabled.")
    if name in (CONSUMER_OFFSETS, TRANSACTION_STATE):
        return R(name=name, topic_id=tid, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                 error_message=f"Deletion of internal topic {name} is not allowed.")
    permits = len(topic.info.replicas)
    if not quota.try_record(permits):
        return R(name=name, topic_id=tid, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED, error_message=THROTTLED_MESSAGE)
    code, message = (await controller.delete_topics([name]))[name]
    if code != ErrorCode.NONE:
        quota.refund(permits)  # the controller refused it after all: no mutation to pay for
    return R(name=name, topic_id=tid, error_code=code, error_message=message)


def _delete(broker, name, topic_id, quota: MutationQuota):
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
    if not quota.try_record(topic.partitions):
        return R(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                 error_message=THROTTLED_MESSAGE)
    topics.delete(topic.name)
    broker.fetch_waiters.notify_topic(topic.name, topic.partitions)
    # its committed offsets go too (Kafka's GroupCoordinator.onPartitionsDeleted)
    broker.group_coordinator.handle_topics_deleted([topic.name])
    return R(name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.NONE, error_message=None)
