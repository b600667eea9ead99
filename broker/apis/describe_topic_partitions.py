"""DescribeTopicPartitions (key 75): topics and their partitions, paged by a cursor (KIP-966).

Versions (we serve 0, as Kafka 4.2):
  v0: flexible; topics (empty = all), response_partition_limit, cursor -> next_cursor
Kafka's paging (DescribeTopicPartitionsRequestHandler, KRaftMetadataCache.
getTopicMetadataForDescribeTopicResponse): topics in name order from the cursor's topic on, the first from
the cursor's partition; at most min(response_partition_limit, 2000) and at least 1 partitions; a topic cut
short sets next_cursor to its next partition, a limit reached at a topic boundary to the next topic's
partition 0. A cursor whose topic is not among the topics named, or with a negative partition, is
INVALID_REQUEST for every topic named (DescribeTopicPartitionsRequest.getErrorResponse). A named topic
that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name); unknown
topics are not listed when all are asked. DESCRIBE on each topic: a named one refused is
TOPIC_AUTHORIZATION_FAILED with a zero id, an unnamed one is left out.
Partitions: leader (-1 when its broker is not registered), leader epoch, replicas, ISR, offline replicas
(not registered); eligible leader replicas and the last known ELR are empty (ELR is not modelled).
Single node: the local topics, this node as each partition's replica, ISR and leader.
Cluster mode: the node's metadata image, on any node (clients send it to any broker).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation, ResourceType
from kcoord.broker.security.check import allowed, authorized_operations
from kcoord.metadata.topics import CONSUMER_OFFSETS, TRANSACTION_STATE, TopicError, validate_topic_name
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default
ZERO_UUID = uuid.UUID(int=0)
R = m.DescribeTopicPartitionsResponse
# A topic as this node knows it: (topic id, internal, partition count, partition index -> its answer)
Found = tuple[uuid.UUID, bool, int, Callable[[int], Any]]


@api(key=75, name="DescribeTopicPartitions", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.DescribeTopicPartitionsRequest):
    lookup, every = _cluster_view(ctx) if ctx.broker.cluster is not None else _local_view(ctx)
    fetch_all = not request.topics
    cursor = request.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    names = set(every() if fetch_all else (t.name for t in request.topics))
    names = {n for n in names if n >= start_name}
    if cursor is not None and ((not fetch_all and cursor.topic_name not in names) or cursor.partition_index < 0):
        return R(throttle_time_ms=0, next_cursor=None, topics=[
            R.DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=t.name,
                                                   topic_id=ZERO_UUID, is_internal=False, partitions=[])
            for t in request.topics])
    refused = []
    ordered = []
    for name in sorted(names):
        if allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            ordered.append(name)
        elif not fetch_all:
            refused.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                is_internal=False, partitions=[]))
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
    topics = []
    next_cursor = None
    for name in ordered:
        if remaining == 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=0)
            break
        found = lookup(name)
        internal = name in (CONSUMER_OFFSETS, TRANSACTION_STATE)
        if found is None:
            if not fetch_all:
                topics.append(R.DescribeTopicPartitionsResponseTopic(
                    error_code=_missing(name), name=name, topic_id=ZERO_UUID, is_internal=internal, partitions=[],
                    topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name)))
            continue
        topic_id, internal, count, partition = found
        first = cursor.partition_index if cursor is not None and name == start_name else 0
        upper = min(count, first + remaining)
        parts = [partition(p) for p in range(first, upper)]
        topics.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=topic_id, is_internal=internal, partitions=parts,
            topic_authorized_operations=authorized_operations(ctx, ResourceType.TOPIC, name)))
        if upper < count:
            next_cursor = R.Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(parts)
    return R(throttle_time_ms=0, topics=topics + refused, next_cursor=next_cursor)


def _missing(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except TopicError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _partition(index: int, leader: int, leader_epoch: int, replicas, isr, offline):
    return R.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.NONE, partition_index=index, leader_id=leader, leader_epoch=leader_epoch,
        replica_nodes=list(replicas), isr_nodes=list(isr), eligible_leader_replicas=[], last_known_elr=[],
        offline_replicas=list(offline))


def _local_view(ctx: RequestContext):
    topics = ctx.broker.topics
    node = ctx.broker.node_id

    def lookup(name: str) -> Found | None:
        topic = topics.get(name)
        if topic is None:
            return None
        return (topic.topic_id, topic.internal, topic.partitions,
                lambda p: _partition(p, node, _leader_epoch(topics.log(name, p)), [node], [node], []))

    return lookup, lambda: [t.name for t in topics.all()]


def _leader_epoch(plog) -> int:
    return -1 if plog is None else plog.leader_epoch


def _cluster_view(ctx: RequestContext):
    assert ctx.broker.cluster is not None
    image = ctx.broker.cluster.image

    def lookup(name: str) -> Found | None:
        topic = image.topics.get(name)
        if topic is None or topic.info is None:
            return None

        def partition(p: int):
            part = topic.partitions.get(p)
            if part is None:
                return R.DescribeTopicPartitionsResponsePartition(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partition_index=p, leader_id=-1,
                    replica_nodes=[], isr_nodes=[], offline_replicas=[])
            reg = part.registration
            leader = reg.leader if reg.leader in image.brokers else -1
            return _partition(p, leader, reg.leader_epoch, reg.replicas, reg.isr,
                              [r for r in reg.replicas if r not in image.brokers])

        return (topic.info.topic_id, name in (CONSUMER_OFFSETS, TRANSACTION_STATE), len(topic.info.replicas),
                partition)

    return lookup, lambda: [n for n, t in image.topics.items() if t.info is not None]
