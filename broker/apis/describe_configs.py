"""DescribeConfigs (key 32): topic, broker and group configuration with Kafka's sources and synonyms.

Versions (we serve 1-4):
  v1: config_source and synonyms (is_default dropped)
  v2: same as v1
  v3: include_documentation; config_type and documentation in the result
  v4: flexible
Sources (Kafka's ConfigHelper): TOPIC (2) -> every topic config: DYNAMIC_TOPIC_CONFIG for an override,
else the source of the broker property it defaults to (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG for server.properties / --override, DEFAULT_CONFIG); synonyms list the override
and then every broker synonym with a value, by precedence. BROKER (4) named by this node's id -> every
property (read-only unless it may change at run time); named "" -> the cluster-default dynamic configs.
GROUP (32) -> every group config: DYNAMIC_GROUP_CONFIG for an override, else DEFAULT_CONFIG.
CLIENT_METRICS (16) -> the subscription's metrics, interval.ms and match: CLIENT_METRICS_CONFIG (7) for what is
set, else DEFAULT_CONFIG (Kafka's ConfigHelper). BROKER_LOGGER (8) -> none.
Kafka's PASSWORD-type settings (sasl.jaas.config, ssl.*password, PEM key material) are answered with a null
value and is_sensitive, as Kafka does.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.listener_config import SENSITIVE
from kcoord.metadata import client_metrics_configs
from kcoord.metadata.dynamic_broker_configs import (
    CLUSTER_DEFAULT,
    DEFAULT,
    DYNAMIC_DEFAULT_BROKER,
    config_text,
)
from kcoord.metadata.group_configs import GROUP_CONFIG_DEFS
from kcoord.metadata.topics import TOPIC_CONFIG_DEFAULTS, broker_default
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SOURCE_TOPIC, SOURCE_CLIENT_METRICS, SOURCE_GROUP = 1, 7, 8
# ConfigType values
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 5, 6, 7
# Topic configs whose broker default is one of several properties (ServerTopicConfigSynonyms).
TOPIC_BROKER_SYNONYM = {**{k: v for k, v in TOPIC_CONFIG_DEFAULTS.items() if v is not None},
                        "retention.ms": "log.retention.ms", "segment.ms": "log.roll.ms"}


@api(key=32, name="DescribeConfigs", min_version=1, max_version=4)
async def handle(ctx: RequestContext, request: m.DescribeConfigsRequest):
    results = []
    for res in request.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        if res.resource_type == TOPIC:
            result = _topic(ctx, res, keys, request)
        elif res.resource_type == BROKER:
            result = _broker(ctx, res, keys, request)
        elif res.resource_type == GROUP:
            result = _group(ctx, res, keys, request)
        elif res.resource_type == CLIENT_METRICS:
            result = _client_metrics(ctx, res, keys, request)
        elif res.resource_type == BROKER_LOGGER:
            result = _result(res, ErrorCode.NONE, None, [])
        else:
            result = _result(res, ErrorCode.INVALID_REQUEST, f"unsupported resource type {res.resource_type}", [])
        results.append(result)
    return m.DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _result(res, code, message, configs):
    return m.DescribeConfigsResponse.DescribeConfigsResult(
        error_code=code, error_message=message, resource_type=res.resource_type,
        resource_name=res.resource_name, configs=configs)


def _entry(request, name, value, read_only, synonyms, config_type, doc, sensitive=False):
    """One config; its source is its first synonym's (DEFAULT_CONFIG when it has none)."""
    source = synonyms[0][1] if synonyms else DEFAULT
    R = m.DescribeConfigsResponse.DescribeConfigsResourceResult
    S = m.DescribeConfigsResponse.DescribeConfigsSynonym
    return R(name=name, value=value, read_only=read_only, config_source=source, is_sensitive=sensitive,
             synonyms=[S(name=n, value=v, source=s) for n, s, v in synonyms] if request.include_synonyms else [],
             config_type=config_type, documentation=doc if request.include_documentation else None)


def _topic(ctx, res, keys, request):
    broker = ctx.broker
    cluster_configs = broker.cluster_topic_configs
    if cluster_configs is not None:  # cluster mode: the cluster's configs, also on a node with no replica
        overrides = cluster_configs.current(res.resource_name)
    else:
        topic = broker.topics.get(res.resource_name)
        overrides = None if topic is None else topic.configs
    if overrides is None:
        return _result(res, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist", [])
    entries = []
    for name in sorted(TOPIC_CONFIG_DEFAULTS):
        if keys is not None and name not in keys:
            continue
        synonyms = [(name, SOURCE_TOPIC, overrides[name])] if name in overrides else []
        broker_key = TOPIC_BROKER_SYNONYM.get(name)
        if broker_key is not None:
            synonyms += broker.dynamic_configs.synonyms(broker_key)
        value = overrides.get(name) or broker_default(broker.config, name)
        entries.append(_entry(request, name, value, False, synonyms, _topic_type(name), None))
    return _result(res, ErrorCode.NONE, None, entries)


def _broker(ctx, res, keys, request):
    broker = ctx.broker
    dynamic = broker.dynamic_configs
    if res.resource_name == CLUSTER_DEFAULT:
        entries = [_entry(request, name, value, False, [(name, DYNAMIC_DEFAULT_BROKER, value)],
                          _type_of(name, broker.config.get(name)), None)
                   for name, value in sorted(dynamic.overrides(CLUSTER_DEFAULT).items())
                   if keys is None or name in keys]
        return _result(res, ErrorCode.NONE, None, entries)
    if res.resource_name != str(broker.node_id):
        return _result(res, ErrorCode.INVALID_REQUEST,
                       f"broker {res.resource_name} is not this node ({broker.node_id})", [])
    entries = []
    for name, value, doc in broker.config.describe():
        if keys is not None and name not in keys:
            continue
        sensitive = name in SENSITIVE  # Kafka's PASSWORD-type settings: never sent, marked sensitive
        text = None if sensitive else config_text(value)
        if dynamic.is_dynamic(name):
            synonyms = dynamic.synonyms(name)
        else:
            source = DEFAULT if broker.config.is_default(name) else 4  # STATIC_BROKER_CONFIG
            synonyms = [(name, source, text)]
        entries.append(_entry(request, name, text, not dynamic.is_dynamic(name), synonyms,
                              _type_of(name, value), doc, sensitive))
    return _result(res, ErrorCode.NONE, None, entries)


def _group(ctx, res, keys, request):
    if not res.resource_name:
        return _result(res, ErrorCode.INVALID_REQUEST, "Group name must not be empty", [])
    overrides = ctx.broker.group_configs.overrides(res.resource_name)
    entries = []
    for name, d in GROUP_CONFIG_DEFS.items():
        if keys is not None and name not in keys:
            continue
        synonyms = [(name, SOURCE_GROUP, overrides[name])] if name in overrides else []
        synonyms.append((name, DEFAULT, str(d.default)))
        entries.append(_entry(request, name, synonyms[0][2], False, synonyms,
                              TYPE_INT if d.type == "int" else TYPE_STRING, d.doc))
    return _result(res, ErrorCode.NONE, None, entries)


def _client_metrics(ctx, res, keys, request):
    if not res.resource_name:
        return _result(res, ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty", [])
    overrides = ctx.broker.client_metrics_configs.overrides(res.resource_name)
    entries = []
    for name, doc in client_metrics_configs.DOCS.items():
        if keys is not None and name not in keys:
            continue
        synonyms = [(name, SOURCE_CLIENT_METRICS, overrides[name])] if name in overrides else []
        synonyms.append((name, DEFAULT, client_metrics_configs.DEFAULTS[name]))
        config_type = TYPE_INT if name == client_metrics_configs.INTERVAL_MS else TYPE_LIST
        entries.append(_entry(request, name, synonyms[0][2], False, synonyms, config_type, doc))
    return _result(res, ErrorCode.NONE, None, entries)


def _type_of(name: str, value) -> int:
    if isinstance(value, bool):
        return TYPE_BOOLEAN
    if isinstance(value, int):
        return TYPE_LONG if name.endswith((".ms", ".bytes")) else TYPE_INT
    if isinstance(value, float):
        return TYPE_DOUBLE
    if isinstance(value, list) or name == "log.cleanup.policy":
        return TYPE_LIST
    return TYPE_STRING


def _topic_type(name: str) -> int:
    if name in ("cleanup.policy",):
        return TYPE_LIST
    if name in ("compression.type", "message.timestamp.type"):
        return TYPE_STRING
    if name == "unclean.leader.election.enable":
        return TYPE_BOOLEAN
    if name == "min.cleanable.dirty.ratio":
        return TYPE_DOUBLE
    return TYPE_LONG if name.endswith((".ms", ".bytes")) else TYPE_INT
