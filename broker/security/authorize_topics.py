"""Authorization guards of the data-plane and topic admin APIs, as KafkaApis applies them: WRITE on each
topic for Produce, READ for Fetch (a follower's Fetch: CLUSTER_ACTION on the cluster instead, for every
partition at once, as KafkaApis.handleFetchRequest checks isFromFollower), DESCRIBE for ListOffsets and Metadata (Metadata of every topic lists
only the describable ones; one named but not describable answers TOPIC_AUTHORIZATION_FAILED; creating a
topic on the way needs CREATE on the cluster or the topic), CREATE for CreateTopics, DELETE for
DeleteTopics; an idempotent producer's InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on
some topic (KIP-679). Refused topics are answered TOPIC_AUTHORIZATION_FAILED beside the handler's answer
for the rest."""
from __future__ import annotations

import uuid

from kcoord.broker.data.fetch_read import replica_id_of
from kcoord.broker.security.acl import AclOperation as Op
from kcoord.broker.security.acl import ResourceType
from kcoord.broker.security.check import allowed, authorized_operations, cluster_allowed
from kcoord.broker.security.guard_util import INT32_MIN, split, then, topic_name
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED
ZERO_UUID = uuid.UUID(int=0)


def _with(req, field: str, kept: list, handler, ctx, refused_entries: list, resp_field: str, empty):
    """Serve `kept` through the handler and add `refused_entries` to its answer."""
    if not refused_entries:
        return handler(ctx, req)
    if not kept:
        return empty()
    setattr(req, field, kept)

    def amend(resp):
        if resp is not None:
            getattr(resp, resp_field).extend(refused_entries)
        return resp

    return then(handler(ctx, req), amend)


def produce(ctx, req, handler):
    R = m.ProduceResponse
    kept, refused = split(ctx, req.topic_data, lambda t: topic_name(ctx, t.name, t.topic_id), Op.WRITE)
    entries = [R.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
        R.PartitionProduceResponse(index=p.index, error_code=TAF, base_offset=-1, log_append_time_ms=-1,
                                   log_start_offset=-1, record_errors=[], error_message=None)
        for p in t.partition_data]) for t in refused]
    return _with(req, "topic_data", kept, handler, ctx, entries, "responses",
                 lambda: None if req.acks == 0 else R(responses=entries, throttle_time_ms=0))


def fetch(ctx, req, handler):
    R = m.FetchResponse
    if replica_id_of(req, ctx.api_version) >= 0:  # a follower replicating: the cluster permission decides for all its partitions
        kept, refused = (req.topics, []) if cluster_allowed(ctx, Op.CLUSTER_ACTION) else ([], req.topics)
    else:
        kept, refused = split(ctx, req.topics, lambda t: topic_name(ctx, t.topic, t.topic_id), Op.READ)
    entries = [R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[
        R.PartitionData(partition_index=p.partition, error_code=TAF, high_watermark=-1, last_stable_offset=-1,
                        log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1, records=None)
        for p in t.partitions]) for t in refused]
    return _with(req, "topics", kept, handler, ctx, entries, "responses",
                 lambda: R(throttle_time_ms=0, error_code=0, session_id=0, responses=entries))


def list_offsets(ctx, req, handler):
    R = m.ListOffsetsResponse
    kept, refused = split(ctx, req.topics, lambda t: t.name, Op.DESCRIBE)
    entries = [R.ListOffsetsTopicResponse(name=t.name, partitions=[
        R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=TAF, old_style_offsets=[],
                                       timestamp=-1, offset=-1, leader_epoch=-1) for p in t.partitions])
        for t in refused]
    return _with(req, "topics", kept, handler, ctx, entries, "topics", lambda: R(throttle_time_ms=0, topics=entries))


def _may_create(ctx, name: str) -> bool:
    return cluster_allowed(ctx, Op.CREATE) or allowed(ctx, Op.CREATE, ResourceType.TOPIC, name)


def metadata(ctx, req, handler):
    R = m.MetadataResponse
    v = ctx.api_version
    refused = []
    if req.topics is not None and (v > 0 or req.topics):
        kept, refused = split(ctx, req.topics, lambda t: topic_name(ctx, t.name, t.topic_id), Op.DESCRIBE)
        req.topics = kept
        if v >= 4 and req.allow_auto_topic_creation:
            existing = ctx.broker.topics
            req.allow_auto_topic_creation = all(existing.get(t.name) is not None or _may_create(ctx, t.name)
                                                for t in kept if t.name)
    wants_topic_ops = v >= 8 and req.include_topic_authorized_operations
    wants_cluster_ops = 8 <= v <= 10 and req.include_cluster_authorized_operations

    def amend(resp):
        listed = [t for t in resp.topics if t.name is None or t.error_code != ErrorCode.NONE
                  or allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, t.name)]
        for t in listed:
            if wants_topic_ops and t.error_code == ErrorCode.NONE:
                t.topic_authorized_operations = authorized_operations(ctx, ResourceType.TOPIC, t.name)
        resp.topics = listed + [R.MetadataResponseTopic(error_code=TAF, name=t.name, topic_id=t.topic_id or ZERO_UUID,
                                                        is_internal=False, partitions=[],
                                                        topic_authorized_operations=INT32_MIN) for t in refused]
        if wants_cluster_ops:
            resp.cluster_authorized_operations = authorized_operations(ctx, ResourceType.CLUSTER, "kafka-cluster")
        return resp

    return then(handler(ctx, req), amend)


def create_topics(ctx, req, handler):
    R = m.CreateTopicsResponse
    kept, refused = [], []
    for t in req.topics:
        (kept if _may_create(ctx, t.name) else refused).append(t)
    entries = [R.CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=TAF, error_message=None,
                                      topic_config_error_code=0, num_partitions=-1, replication_factor=-1, configs=[])
               for t in refused]
    return _with(req, "topics", kept, handler, ctx, entries, "topics", lambda: R(throttle_time_ms=0, topics=entries))


def delete_topics(ctx, req, handler):
    R = m.DeleteTopicsResponse
    if ctx.api_version >= 6:
        kept, refused = split(ctx, req.topics, lambda t: topic_name(ctx, t.name, t.topic_id), Op.DELETE)
        entries = [R.DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=TAF, error_message=None)
                   for t in refused]
        field = "topics"
    else:
        kept, refused = split(ctx, req.topic_names, lambda t: t, Op.DELETE)
        entries = [R.DeletableTopicResult(name=t, topic_id=ZERO_UUID, error_code=TAF, error_message=None)
                   for t in refused]
        field = "topic_names"
    return _with(req, field, kept, handler, ctx, entries, "responses",
                 lambda: R(throttle_time_ms=0, responses=entries))


def init_producer_id(ctx, req, handler):
    if req.transactional_id is not None or cluster_allowed(ctx, Op.IDEMPOTENT_WRITE) or any(
            allowed(ctx, Op.WRITE, ResourceType.TOPIC, t.name) for t in ctx.broker.topics.all()):
        return handler(ctx, req)
    return m.InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    producer_id=-1, producer_epoch=-1)


_CONFIG_RESOURCES = {2: (ResourceType.TOPIC, TAF), 4: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                     8: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                     # CLIENT_METRICS subscriptions are the cluster's (ConfigAdminManager, KIP-714)
                     16: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                     32: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED)}


def describe_configs(ctx, req, handler):
    """DESCRIBE_CONFIGS on the topic / the cluster (a broker) / the group (ConfigAdminManager)."""
    R = m.DescribeConfigsResponse
    order = [(r.resource_type, r.resource_name) for r in req.resources]
    refused = {}
    for rtype, name in order:
        kind, error = _CONFIG_RESOURCES.get(rtype, (None, None))
        target = "kafka-cluster" if kind == ResourceType.CLUSTER else name
        if kind is not None and not allowed(ctx, Op.DESCRIBE_CONFIGS, kind, target):
            refused[(rtype, name)] = error
    req.resources = [r for r in req.resources if (r.resource_type, r.resource_name) not in refused]

    def amend(resp):
        done = {(r.resource_type, r.resource_name): r for r in resp.results}
        resp.results = [done.get(key) or R.DescribeConfigsResult(error_code=refused[key], error_message=None,
                                                                  resource_type=key[0], resource_name=key[1],
                                                                  configs=[]) for key in order]
        return resp

    return then(handler(ctx, req), amend) if req.resources else amend(R(throttle_time_ms=0, results=[]))


def describe_cluster(ctx, req, handler):
    """Everyone may ask; cluster_authorized_operations is this principal's, when asked for."""
    if not req.include_cluster_authorized_operations:
        return handler(ctx, req)

    def amend(resp):
        resp.cluster_authorized_operations = authorized_operations(ctx, ResourceType.CLUSTER, "kafka-cluster")
        return resp

    return then(handler(ctx, req), amend)


GUARDS = {0: produce, 1: fetch, 2: list_offsets, 3: metadata, 19: create_topics, 20: delete_topics,
          22: init_producer_id, 32: describe_configs, 60: describe_cluster}
