"""CreateTopics (key 19): create topics with a partition count and config overrides.

Versions (we serve 2-7):
  v2: throttle_time_ms (v1 brought validate_only and error messages)
  v3: same as v2
  v4: same as v3 (KIP-464: -1 partitions / replication factor = broker defaults)
  v5: flexible; the result carries partitions, replication factor and the effective configs
  v6: same as v5
  v7: topic id in the result
Single node: replication factor must be 1 (or -1 = default); a manual assignment may only name this
node. Errors as Kafka: TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
INVALID_REPLICATION_ASSIGNMENT, INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, INVALID_REQUEST (a name twice).
"""
from __future__ import annotations

import uuid
from collections import Counter

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.metadata.topics import TopicError
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

CONFIG_SOURCE_TOPIC, CONFIG_SOURCE_DEFAULT = 1, 5
ZERO_UUID = uuid.UUID(int=0)  # validate_only: no topic, no id


@api(key=19, name="CreateTopics", min_version=2, max_version=7)
async def handle(ctx: RequestContext, request: m.CreateTopicsRequest):
    counts = Counter(t.name for t in request.topics)
    results = []
    for t in request.topics:
        if counts[t.name] > 1:
            results.append(_result(t.name, ErrorCode.INVALID_REQUEST,
                                   f"Create topics request from client contains duplicate topic {t.name}"))
            continue
        results.append(_create(ctx, t, request.validate_only))
    return m.CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _result(name: str, code: ErrorCode, message: str | None = None):
    return m.CreateTopicsResponse.CreatableTopicResult(
        name=name, error_code=code, error_message=message, num_partitions=-1, replication_factor=-1,
        configs=None)


def _create(ctx, t, validate_only: bool):
    topics = ctx.broker.topics
    configs = {c.name: c.value for c in t.configs}
    assignments = [(a.partition_index, list(a.broker_ids)) for a in t.assignments]
    try:
        partitions = topics.check_create(t.name, t.num_partitions, t.replication_factor, configs, assignments)
    except TopicError as exc:
        return _result(t.name, exc.code, exc.message)
    if validate_only:
        topic_id, effective = ZERO_UUID, topics.preview_configs(configs)
    else:
        topic = topics.create(t.name, partitions, configs)
        topic_id, effective = topic.topic_id, topics.effective_configs(topic)
    R = m.CreateTopicsResponse.CreatableTopicResult
    return R(name=t.name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
             num_partitions=partitions, replication_factor=1, topic_config_error_code=ErrorCode.NONE,
             configs=[R.CreatableTopicConfigs(
                 name=k, value=v, read_only=False, is_sensitive=False,
                 config_source=CONFIG_SOURCE_DEFAULT if is_default else CONFIG_SOURCE_TOPIC)
                 for k, (v, is_default) in sorted(effective.items())])
