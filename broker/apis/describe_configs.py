"""DescribeConfigs (key 32): topic and broker configuration, as admin tools ask for it.

Versions (we serve 1-4):
  v1: config_source and synonyms (is_default dropped)
  v2: same as v1
  v3: include_documentation; config_type and documentation in the result
  v4: flexible
Resources: TOPIC (2) -> its overrides and the broker defaults it inherits; BROKER (4) named by this
node id (or "" for the cluster default) -> every broker property, STATIC_BROKER_CONFIG when
server.properties or --override sets it (whatever the value), DEFAULT_CONFIG otherwise, as Kafka
reports them; BROKER_LOGGER (8) -> none. Kafka's PASSWORD-type settings (sasl.jaas.config, ssl.*password,
PEM key material) are answered with a null value and is_sensitive, as Kafka does.
"""
from __future__ import annotations

from broker.data.topics import TOPIC_CONFIG_DEFAULTS
from broker.registry import api
from broker.security.listener_config import SENSITIVE
from protocol import messages as m
from protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
# ConfigSource values (DescribeConfigsResponse.json)
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5
# ConfigType values
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 5, 6, 7


@api(key=32, name="DescribeConfigs", min_version=1, max_version=4)
async def handle(ctx, request):
    results = []
    for res in request.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        if res.resource_type == TOPIC:
            result = _topic(ctx, res, keys, request)
        elif res.resource_type == BROKER:
            result = _broker(ctx, res, keys, request)
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


def _entry(name, value, read_only, source, synonyms, config_type, doc, sensitive=False):
    R = m.DescribeConfigsResponse.DescribeConfigsResourceResult
    return R(name=name, value=value, read_only=read_only, config_source=source, is_sensitive=sensitive,
             synonyms=synonyms, config_type=config_type, documentation=doc)


def _synonym(name, value, source):
    return m.DescribeConfigsResponse.DescribeConfigsSynonym(name=name, value=value, source=source)


def _topic(ctx, res, keys, request):
    topics = ctx.broker.topics
    topic = topics.get(res.resource_name)
    if topic is None:
        return _result(res, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       f"Topic {res.resource_name} does not exist", [])
    entries = []
    for name, (value, is_default) in sorted(topics.effective_configs(topic).items()):
        if keys is not None and name not in keys:
            continue
        broker_key = TOPIC_CONFIG_DEFAULTS.get(name)
        synonyms = []
        if request.include_synonyms:
            if not is_default:
                synonyms.append(_synonym(name, value, SOURCE_TOPIC))
            if broker_key is not None:
                synonyms.append(_synonym(broker_key, str(ctx.broker.config.get(broker_key)), SOURCE_DEFAULT))
        entries.append(_entry(name, value, False, SOURCE_DEFAULT if is_default else SOURCE_TOPIC,
                              synonyms, _topic_type(name), None))
    return _result(res, ErrorCode.NONE, None, entries)


def _broker(ctx, res, keys, request):
    broker = ctx.broker
    if res.resource_name not in ("", str(broker.node_id)):
        return _result(res, ErrorCode.INVALID_REQUEST,
                       f"broker {res.resource_name} is not this node ({broker.node_id})", [])
    entries = []
    for name, value, doc in broker.config.describe():
        if keys is not None and name not in keys:
            continue
        source = SOURCE_DEFAULT if broker.config.is_default(name) else SOURCE_STATIC_BROKER
        sensitive = name in SENSITIVE  # Kafka's PASSWORD-type settings: never sent, marked sensitive
        text = None if sensitive else _text(value)
        synonyms = [_synonym(name, text, source)] if request.include_synonyms else []
        entries.append(_entry(name, text, True, source, synonyms, _type_of(name, value),
                              doc if request.include_documentation else None, sensitive))
    return _result(res, ErrorCode.NONE, None, entries)


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _type_of(name: str, value) -> int:
    if isinstance(value, bool):
        return TYPE_BOOLEAN
    if isinstance(value, int):
        return TYPE_LONG if name.endswith((".ms", ".bytes")) else TYPE_INT
    if isinstance(value, float):
        return TYPE_DOUBLE
    if isinstance(value, list):
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
