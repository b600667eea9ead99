"""Metadata (key 3): this node as the only broker and controller; topics and their partitions.

Versions:
  v0: topics (empty = all), brokers, partition leaders/replicas/isr
  v1: null topics = all (empty = none); rack, controller id, is_internal
  v2: cluster id
  v3: throttle_time_ms
  v4: allow_auto_topic_creation
  v5: offline_replicas
  v6: same as v5
  v7: leader_epoch (the epoch the partition's log stamps on its batches; it rises each time the node
      leads the partition again, i.e. at every start, as a single-node KRaft broker's would)
  v8: authorized operations (we return "not provided")
  v9: flexible
  v10: topic ids (stable across restarts; requests may name topics by id)
  v11: cluster authorized operations removed
  v12: topic name nullable in responses (topics requested by id)
  v13: top-level error code
"""
from __future__ import annotations

import uuid

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.metadata.topics import TopicError, validate_topic_name
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

ZERO_UUID = uuid.UUID(int=0)


@api(key=3, name="Metadata", min_version=0, max_version=13)
async def handle(ctx: RequestContext, request: m.MetadataRequest):
    broker = ctx.broker
    topics_mgr = broker.topics
    v = ctx.api_version
    allow_auto = request.allow_auto_topic_creation if v >= 4 else True
    wanted = request.topics
    if wanted is None or (v == 0 and not wanted):
        results = [_topic(topics_mgr, t, broker.node_id) for t in topics_mgr.all()]
    else:
        results = []
        for req in wanted:
            name = req.name
            if name is None and v >= 10:
                topic = topics_mgr.by_id(req.topic_id)
                results.append(_topic(topics_mgr, topic, broker.node_id) if topic is not None else
                               m.MetadataResponse.MetadataResponseTopic(
                                   error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                   topic_id=req.topic_id, partitions=[]))
                continue
            results.append(_lookup(topics_mgr, name, allow_auto, broker.node_id))
    endpoint = broker.endpoint_for(ctx.listener)
    return m.MetadataResponse(
        throttle_time_ms=0,
        brokers=[m.MetadataResponse.MetadataResponseBroker(
            node_id=broker.node_id, host=endpoint.host, port=endpoint.port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=results,
        error_code=ErrorCode.NONE)


def _lookup(topics_mgr, name: str, allow_auto: bool, node_id: int):
    topic = topics_mgr.get(name)
    if topic is None:
        try:
            validate_topic_name(name)
        except TopicError:
            return _error(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
        if allow_auto:
            topic = topics_mgr.maybe_auto_create(name)
        if topic is None:
            return _error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return _topic(topics_mgr, topic, node_id)


def _error(name: str, code: ErrorCode):
    return m.MetadataResponse.MetadataResponseTopic(error_code=code, name=name, topic_id=ZERO_UUID,
                                                    is_internal=False, partitions=[])


def _topic(topics_mgr, topic, node_id: int):
    P = m.MetadataResponse.MetadataResponsePartition
    return m.MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id, is_internal=topic.internal,
        partitions=[P(error_code=ErrorCode.NONE, partition_index=p, leader_id=node_id,
                      leader_epoch=topics_mgr.log(topic.name, p).leader_epoch, replica_nodes=[node_id],
                      isr_nodes=[node_id],
                      offline_replicas=[])
                    for p in range(topic.partitions)])
