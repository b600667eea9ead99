"""CreateTopics (key 19): create topics with a partition count and config overrides.

Versions (we serve 2-7):
  v2: throttle_time_ms (v1 brought validate_only and error messages)
  v3: same as v2
  v4: same as v3 (KIP-464: -1 partitions / replication factor = broker defaults)
  v5: flexible; the result carries partitions, replication factor and the effective configs
  v6: same as v5
  v7: topic id in the result
From v6 a topic above controller_mutation_rate gets THROTTLING_QUOTA_EXCEEDED (KIP-599); before v6 that
quota only throttles the response (broker/controller_mutation_quota.py).
Single node: replication factor must be 1 (or -1 = default); a manual assignment may only name this
node. Errors as Kafka: TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
INVALID_REPLICATION_ASSIGNMENT, INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, INVALID_REQUEST (a name twice).
Cluster mode: the active controller creates the topic (kcoord.cluster.controller: placement over the
registered brokers, rack-aware; INVALID_REPLICATION_FACTOR "Unable to replicate the partition 4 time(s):
..." as KRaft words it); -1 partitions / replication factor = num.partitions / default.replication.factor.
Any other node answers NOT_CONTROLLER, as a ZooKeeper-era broker did: clients send CreateTopics to the
controller Metadata names.
The mutation quota charges a topic's partition count once the topic passes every other check, validate_only
included (ReplicationControlManager.createTopic calls applyPartitionChangeQuota before the validate_only
branch of createTopics drops the records).
"""
from __future__ import annotations

import random
import uuid
from collections import Counter
from typing import TYPE_CHECKING

from kcoord.broker.context import RequestContext
from kcoord.broker.controller_mutation_quota import (
    THROTTLED_MESSAGE,
    MutationQuota,
    quota_for_request,
    throttle_response,
)
from kcoord.broker.registry import api
from kcoord.cluster.replica_placement import (
    PlacementError,
    check_manual_assignments,
    place_replicas,
)
from kcoord.metadata.topics import TopicError, validate_topic_configs, validate_topic_name
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kcoord.cluster.node import ClusterNode

CONFIG_SOURCE_TOPIC, CONFIG_SOURCE_DEFAULT = 1, 5
ZERO_UUID = uuid.UUID(int=0)  # validate_only: no topic, no id


@api(key=19, name="CreateTopics", min_version=2, max_version=7)
async def handle(ctx: RequestContext, request: m.CreateTopicsRequest):
    counts = Counter(t.name for t in request.topics)
    quota = quota_for_request(ctx, "CreateTopics")
    results = []
    for t in request.topics:
        if counts[t.name] > 1:
            results.append(_result(t.name, ErrorCode.INVALID_REQUEST,
                                   f"Create topics request from client contains duplicate topic {t.name}"))
            continue
        if ctx.broker.cluster is not None:
            results.append(await _create_in_cluster(ctx, ctx.broker.cluster, t, request.validate_only, quota))
        else:
            results.append(_create(ctx, t, request.validate_only, quota))
    return m.CreateTopicsResponse(throttle_time_ms=throttle_response(ctx, quota), topics=results)


def _result(name: str, code: ErrorCode, message: str | None = None):
    return m.CreateTopicsResponse.CreatableTopicResult(
        name=name, error_code=code, error_message=message, num_partitions=-1, replication_factor=-1,
        configs=None)


def _create(ctx, t, validate_only: bool, quota: MutationQuota):
    topics = ctx.broker.topics
    configs = {c.name: c.value for c in t.configs}
    assignments = [(a.partition_index, list(a.broker_ids)) for a in t.assignments]
    try:
        partitions = topics.check_create(t.name, t.num_partitions, t.replication_factor, configs, assignments)
    except TopicError as exc:
        return _result(t.name, exc.code, exc.message)
    if not quota.try_record(partitions):
        return _result(t.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
    if validate_only:
        topic_id, effective = ZERO_UUID, topics.preview_configs(configs)
    else:
        topic = topics.create(t.name, partitions, configs)
        topic_id, effective = topic.topic_id, topics.effective_configs(topic)
    return _created(t.name, topic_id, partitions, 1, effective)


def _created(name: str, topic_id: uuid.UUID, partitions: int, replication_factor: int,
             effective: dict[str, tuple[str, bool]]):
    R = m.CreateTopicsResponse.CreatableTopicResult
    return R(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
             num_partitions=partitions, replication_factor=replication_factor,
             topic_config_error_code=ErrorCode.NONE,
             configs=[R.CreatableTopicConfigs(
                 name=k, value=v, read_only=False, is_sensitive=False,
                 config_source=CONFIG_SOURCE_DEFAULT if is_default else CONFIG_SOURCE_TOPIC)
                 for k, (v, is_default) in sorted(effective.items())])


async def _create_in_cluster(ctx: RequestContext, cluster: ClusterNode, t, validate_only: bool,
                             quota: MutationQuota):
    if not cluster.is_controller:
        return _result(t.name, ErrorCode.NOT_CONTROLLER, f"This node ({cluster.node_id}) is not the controller.")
    config = ctx.broker.config
    configs = {c.name: c.value for c in t.configs}
    assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
    partitions, rf = t.num_partitions, t.replication_factor
    try:
        validate_topic_name(t.name)
        if assignments is not None and (partitions != -1 or rf != -1):
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignments were set.")
        validate_topic_configs(configs)
    except TopicError as exc:
        return _result(t.name, exc.code, exc.message)
    partitions = config.get("num.partitions") if partitions == -1 else partitions
    rf = config.get("default.replication.factor") if rf == -1 else rf
    effective = ctx.broker.topics.preview_configs(configs)
    if validate_only:  # the controller's checks, without a write
        image = cluster.image
        if t.name in image.topics:
            return _result(t.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        try:
            if assignments is not None:
                lists = check_manual_assignments(list(assignments.items()), set(image.brokers), image.live_brokers())
            elif partitions <= 0:
                return _result(t.name, ErrorCode.INVALID_PARTITIONS,
                               f"Number of partitions was set to an invalid value {partitions}.")
            else:
                lists = place_replicas(image.usable_brokers(), partitions, rf, random.Random())
        except PlacementError as exc:
            return _result(t.name, exc.code, exc.message)
        if not quota.try_record(len(lists)):
            return _result(t.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
        return _created(t.name, ZERO_UUID, len(lists), len(lists[0]) if lists else rf, effective)
    # the controller checks the rest as it writes: charge what passes the checks made here, give it back if
    # the controller refuses the topic (Kafka charges after every other check)
    permits = len(assignments) if assignments is not None else partitions
    charged = permits > 0 and t.name not in cluster.image.topics
    if charged and not quota.try_record(permits):
        return _result(t.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
    result = await cluster.create_topic(t.name, partitions, rf, {k: v for k, v in configs.items() if v is not None},
                                        assignments)
    if result.error != ErrorCode.NONE:
        if charged:
            quota.refund(permits)
        return _result(t.name, result.error, result.message)
    replicas = next(iter(result.assignment.values()), ())
    return _created(t.name, result.topic_id or ZERO_UUID, len(result.assignment), len(replicas), effective)
