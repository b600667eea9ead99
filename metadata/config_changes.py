"""Changing configs of a resource (Incremental/AlterConfigs): read its current overrides, compute the
new set (pure), validate it as Kafka does, store it durably and apply it.

Resources: TOPIC (2) -> the topic's overrides (TopicManager); BROKER (4) -> dynamic broker configs;
GROUP (32) -> group-level configs; CLIENT_METRICS (16) -> client telemetry subscriptions (KIP-714). Incremental operations follow Kafka's
ConfigAdminManager.prepareIncrementalConfigs: SET, DELETE, and APPEND / SUBTRACT for list configs
only, starting from the current value (the override, else the default); names twice in one
resource and null values for anything but DELETE are INVALID_REQUEST.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from kcoord.metadata.client_metrics_configs import ClientMetricsConfigInvalid
from kcoord.metadata.cordoned_log_dirs import CORDONED_LOG_DIRS
from kcoord.metadata.dynamic_broker_configs import ConfigRefused
from kcoord.metadata.group_configs import ConfigInvalid
from kcoord.metadata.prefix_follower import StaleCopy
from kcoord.metadata.store import StoreError
from kcoord.metadata.topics import TopicError, broker_default, validate_topic_configs
from kcoord.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = frozenset({"cleanup.policy", "log.cleanup.policy", "metrics", "match"})
STALE_COPY_RETRIES = 10  # cluster mode: a change computed again after losing to another node's


class ConfigChangeError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def current_overrides(broker: Any, resource_type: int, name: str) -> dict[str, str]:
    if resource_type == TOPIC:
        if broker.cluster_topic_configs is not None:  # cluster mode: the cluster's, on any node
            configs = broker.cluster_topic_configs.current(name)
        else:
            topic = broker.topics.get(name)
            configs = None if topic is None else dict(topic.configs)
        if configs is None:
            raise ConfigChangeError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        return configs
    if resource_type == BROKER:
        return broker.dynamic_configs.overrides(name)
    if resource_type == GROUP:
        if not name:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        return broker.group_configs.overrides(name)
    if resource_type == CLIENT_METRICS:
        if not name:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
        return broker.client_metrics_configs.overrides(name)
    raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def check_no_duplicates(names: list[str]) -> None:
    if any(n > 1 for n in Counter(names).values()):
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")


def incremental(current: dict[str, str], ops: list[tuple[str, int, str | None]],
                default_of) -> dict[str, str]:
    """The overrides after `ops` [(name, operation, value)]; `default_of(name)` is the value a list
    config starts from when it has no override."""
    check_no_duplicates([name for name, _, _ in ops])
    nulls = [name for name, op, value in ops if value is None and op != DELETE]
    if nulls:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
    out = dict(current)
    for name, op, value in ops:
        if op == SET:
            out[name] = value
        elif op == DELETE:
            out.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            verb = "append" if op == APPEND else "subtract"
            if name not in LIST_CONFIGS:
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG,
                                        f"Config value {verb} is not allowed for config key: {name}")
            old = [v for v in (out.get(name) or default_of(name) or "").split(",") if v]
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            new = old + [v for v in given if v not in old] if op == APPEND else [v for v in old if v not in given]
            out[name] = ",".join(new)
        else:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown alter config operation {op}")
    return out


def default_of(broker: Any, resource_type: int):
    """The starting value of a list config without override, per resource type."""
    if resource_type == TOPIC:
        return lambda name: broker_default(broker.config, name) if name == "cleanup.policy" else None
    if resource_type == BROKER:
        return lambda name: str(broker.config.get(name)) if name == "log.cleanup.policy" else None
    return lambda name: None


async def replace(broker: Any, resource_type: int, name: str, configs: dict[str, str], validate_only: bool) -> None:
    """Validate `configs` as the resource's whole set of overrides; unless validate_only, store and apply it
    (a topic's in cluster mode: in the metadata store, which every node follows)."""
    try:
        if resource_type == TOPIC:
            validate_topic_configs(configs)
            broker.log_config(configs)  # LogConfig's own bounds (e.g. segment.bytes)
            if not validate_only and broker.cluster_topic_configs is not None:
                if not await broker.cluster_topic_configs.alter(name, configs):
                    raise ConfigChangeError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
            elif not validate_only:
                broker.topics.set_configs(name, configs)
        elif resource_type == BROKER:
            if CORDONED_LOG_DIRS in configs and not broker.features.cordoning_supported():
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"{CORDONED_LOG_DIRS} needs metadata.version "
                                        "4.3-IV0 or later (KIP-1066)")
            broker.dynamic_configs.validate(name, configs)
            if not validate_only and broker.cluster_broker_configs is not None:  # every node follows it
                await broker.cluster_broker_configs.alter(name, configs)
            elif not validate_only:
                broker.dynamic_configs.replace(name, configs)
                broker.topics.refresh_log_configs()
        elif resource_type == GROUP:
            broker.group_configs.validate(name, configs)
            if not validate_only and broker.cluster_group_configs is not None:  # every node follows it
                await broker.cluster_group_configs.alter(name, configs)
            elif not validate_only:
                broker.group_configs.replace(name, configs)
        elif resource_type == CLIENT_METRICS:
            broker.client_metrics_configs.validate(name, configs)
            if not validate_only and broker.cluster_client_metrics is not None:  # every node follows it
                await broker.cluster_client_metrics.alter(name, configs)
            elif not validate_only:
                broker.client_metrics_configs.replace(name, configs)
    except ClientMetricsConfigInvalid as exc:
        raise ConfigChangeError(ErrorCode[exc.code_name], str(exc)) from None
    except TopicError as exc:
        raise ConfigChangeError(exc.code, exc.message) from None
    except ConfigRefused as exc:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    except StoreError as exc:
        raise ConfigChangeError(ErrorCode.REQUEST_TIMED_OUT, f"The cluster metadata store did not answer: {exc}") from None
    except (ConfigInvalid, ValueError) as exc:
        raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(exc)) from None


async def alter_resources(broker: Any, request: Any, response_class: Any, wanted_of) -> Any:
    """Answer an (Incremental)AlterConfigs request: each resource on its own, `wanted_of(current overrides,
    resource)` giving the new whole set (or raising ConfigChangeError)."""
    responses = []
    for res in request.resources:
        code, message = ErrorCode.NONE, None
        try:
            for attempt in range(STALE_COPY_RETRIES):
                current = current_overrides(broker, res.resource_type, res.resource_name)
                try:
                    await replace(broker, res.resource_type, res.resource_name, wanted_of(current, res),
                                  request.validate_only)
                    break
                except StaleCopy:  # cluster mode: another node changed the resource first; our copy has it now
                    if attempt == STALE_COPY_RETRIES - 1:
                        raise ConfigChangeError(ErrorCode.REQUEST_TIMED_OUT, "The resource kept changing under "
                                                f"this change ({STALE_COPY_RETRIES} attempts)") from None
        except ConfigChangeError as exc:
            code, message = exc.code, exc.message
        responses.append(response_class.AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=res.resource_type,
            resource_name=res.resource_name))
    return response_class(throttle_time_ms=0, responses=responses)
