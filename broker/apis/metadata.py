"""Metadata (key 3): brokers, controller, topics and their partitions.

Single node: this node as the only broker, controller and leader. Cluster mode (kcoord.etcd.connect): every registered broker with its rack, the controller, and per
partition the leader, leader epoch, replicas, ISR and offline replicas from the node's metadata image.

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
from typing import TYPE_CHECKING

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.metadata.topics import CONSUMER_OFFSETS, TRANSACTION_STATE, TopicError, validate_topic_name
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kcoord.cluster.metadata_image import MetadataImage, TopicImage
    from kcoord.cluster.node import ClusterNode

ZERO_UUID = uuid.UUID(int=0)


@api(key=3, name="Metadata", min_version=0, max_version=13)
async def handle(ctx: RequestContext, request: m.MetadataRequest):
    broker = ctx.broker
    if broker.cluster is not None:
        return await _cluster(ctx, request, broker.cluster)
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


# -- cluster mode -------------------------------------------------------------------------------------

async def _cluster(ctx: RequestContext, request: m.MetadataRequest, cluster: ClusterNode):
    """Kafka's answer from the node's metadata image (KafkaApis.handleTopicMetadataRequest with the
    KRaftMetadataCache): every registered broker, the controller, each partition's state; a partition
    without a leader is LEADER_NOT_AVAILABLE with leader -1; offline replicas are the unregistered ones."""
    v = ctx.api_version
    image = cluster.image
    allow_auto = request.allow_auto_topic_creation if v >= 4 else True
    wanted = request.topics
    results = []
    if wanted is None or (v == 0 and not wanted):
        results = [_cluster_topic(image, t) for _, t in sorted(image.topics.items()) if t.info is not None]
    else:
        by_id = {t.info.topic_id: t for t in image.topics.values() if t.info is not None}
        missing: list[str] = []
        for req in wanted:
            if req.name is None and v >= 10:
                topic = by_id.get(req.topic_id)
                results.append(_cluster_topic(image, topic) if topic is not None else
                               m.MetadataResponse.MetadataResponseTopic(
                                   error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                   topic_id=req.topic_id, partitions=[]))
                continue
            topic = image.topics.get(req.name)
            if topic is not None and topic.info is not None:
                results.append(_cluster_topic(image, topic))
                continue
            try:
                validate_topic_name(req.name)
            except TopicError:
                results.append(_error(req.name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            if (allow_auto and ctx.broker.config.get("auto.create.topics.enable")
                    and req.name not in (CONSUMER_OFFSETS, TRANSACTION_STATE)):
                missing.append(req.name)
                results.append(_error(req.name, ErrorCode.LEADER_NOT_AVAILABLE))  # Kafka's answer while it is created
            else:
                results.append(_error(req.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        if missing:  # AutoTopicCreationManager: through the controller, with the broker defaults
            config = ctx.broker.config
            created = await cluster.create_topics([(name, config.get("num.partitions"),
                                                    config.get("default.replication.factor"), {})
                                                   for name in missing])
            for i, topic_result in enumerate(results):
                outcome = created.get(topic_result.name) if topic_result.name in missing else None
                if outcome is not None and outcome.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                    results[i] = _error(topic_result.name, outcome.error)
    brokers = []
    for b in cluster.live_brokers():
        endpoint = next((e for e in b.info.listeners if e.name == ctx.listener), None) or \
            (b.info.listeners[0] if b.info.listeners else None)
        if endpoint is not None:
            brokers.append(m.MetadataResponse.MetadataResponseBroker(
                node_id=b.id, host=endpoint.host, port=endpoint.port, rack=b.info.rack))
    return m.MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=cluster.cluster_id,
                              controller_id=cluster.controller_id, topics=results, error_code=ErrorCode.NONE)


def _cluster_topic(image: MetadataImage, topic: TopicImage):
    assert topic.info is not None
    P = m.MetadataResponse.MetadataResponsePartition
    registered = image.brokers
    partitions = []
    for index, part in sorted(topic.partitions.items()):
        reg = part.registration
        # KRaftMetadataCache.getPartitionMetadata: a leader that is not a registered (live) broker is
        # answered as none (-1, LEADER_NOT_AVAILABLE), as between a node's death and the controller's
        # election; clients then wait and refresh instead of connecting to a broker they cannot find
        leads = reg.has_leader and reg.leader in registered
        partitions.append(P(
            error_code=ErrorCode.NONE if leads else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=index, leader_id=reg.leader if leads else -1, leader_epoch=reg.leader_epoch,
            replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr),
            offline_replicas=[r for r in reg.replicas if r not in registered]))
    return m.MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.info.topic_id,
        is_internal=topic.name in (CONSUMER_OFFSETS, TRANSACTION_STATE), partitions=partitions)
