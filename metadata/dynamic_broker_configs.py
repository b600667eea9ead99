"""Dynamic broker configs (KIP-226): the BROKER resource of Incremental/AlterConfigs, per node (resource
name = node.id, Kafka's DYNAMIC_BROKER_CONFIG) or for the cluster default (name "",
DYNAMIC_DEFAULT_BROKER_CONFIG), kept in log.dirs/kcoord-broker-configs.json so they survive a restart.

Which properties may change at run time: the broker-level defaults of the topic configs storage
honours (Kafka's DynamicLogConfig.ReconfigurableConfigs, the log.* synonyms of topic configs);
anything else is refused as Kafka's DynamicBrokerConfig.validateConfigs does ("Cannot update these
configs dynamically"). Precedence, as Kafka: per-node dynamic > cluster-default dynamic > static
(server.properties / --override) > default. The effective values are written into the broker's
config, so everything reading `config.get(...)` sees them; topics without an override then get new
log configs (the next retention / cleaner pass uses them). In cluster mode the layers are the cluster's
(kcoord.broker.cluster_configs follows them from the metadata store into `replace_layers`; the file
is not read), so a cluster-default change made through one node applies on every node.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kcoord.metadata.cordoned_log_dirs import CORDONED_LOG_DIRS
from kcoord.metadata.cordoned_log_dirs import refusal as cordon_refusal
from kcoord.metadata.json_file import read_json, write_json_atomically

log = logging.getLogger("kcoord.configs")

BROKER_CONFIGS_FILE = "kcoord-broker-configs.json"
DYNAMIC_BROKER_PROPERTIES = frozenset({
    "log.cleanup.policy", "log.retention.ms", "log.retention.minutes", "log.retention.hours",
    "log.retention.bytes", "log.segment.bytes", "log.roll.ms", "log.roll.hours", "log.message.timestamp.type",
    "message.max.bytes", "log.cleaner.delete.retention.ms", "log.cleaner.min.cleanable.ratio",
    "log.index.interval.bytes",
    CORDONED_LOG_DIRS,  # KIP-1066: per node; the metadata.version gate is config_changes'
    # connection quotas (SocketServer.ReconfigurableConfigs): new connections get them
    "max.connections", "max.connection.creation.rate", "max.connections.per.ip", "max.connections.per.ip.overrides",
})
# ConfigSource values (DescribeConfigsResponse.json)
DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 2, 3, 4, 5
CLUSTER_DEFAULT = ""
# Broker properties that stand for one setting (Kafka's DynamicBrokerConfig.brokerConfigSynonyms).
_SYNONYM_GROUPS = (("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                   ("log.roll.ms", "log.roll.hours"))
SYNONYMS = {name: group for group in _SYNONYM_GROUPS for name in group}


class PropertyDef(Protocol):
    """One row of the broker's property table (kcoord.broker.config.PROPERTIES, handed in by the broker):
    its default as written in server.properties, and how a text value parses."""

    @property
    def default(self) -> Any: ...

    @property
    def parse(self) -> Callable[[Any], Any]: ...


class StaticConfig(Protocol):
    """What the store reads of the broker's config (kcoord.broker.config.BrokerConfig)."""

    props: dict[str, Any]

    def is_default(self, name: str) -> bool: ...


class ConfigRefused(ValueError):
    """What Kafka answers INVALID_REQUEST for (a ConfigException from the dynamic-config validation)."""


def _parse(properties: Mapping[str, PropertyDef], name: str, raw: str) -> Any:
    if name == "log.cleanup.policy":  # a list at run time, as the topic config it stands for
        parts = [p.strip() for p in raw.split(",") if p.strip()]
        if not parts or not set(parts) <= {"delete", "compact"}:
            raise ConfigRefused(f"Invalid value {raw} for configuration {name}")
        return ",".join(parts)
    try:
        return properties[name].parse(raw)
    except (ValueError, TypeError) as exc:
        raise ConfigRefused(f"Invalid value {raw} for configuration {name}: {exc}") from None


class DynamicBrokerConfigs:
    def __init__(self, log_dir: str, config: StaticConfig, node_id: int,
                 properties: Mapping[str, PropertyDef], *, read_file: bool = True) -> None:
        self._path = os.path.join(log_dir, BROKER_CONFIGS_FILE)
        self._config = config
        self._properties = properties
        self._node = str(node_id)
        self._static = dict(config.props)  # what server.properties / --override / defaults gave
        self._layers: dict[str, dict[str, str]] = read_json(self._path, {}).get("brokers", {}) if read_file else {}
        self._apply()
        self.on_change: Callable[[], None] = lambda: None  # after the effective values changed (the acceptors)

    def is_dynamic(self, name: str) -> bool:
        return name in DYNAMIC_BROKER_PROPERTIES

    def overrides(self, resource_name: str) -> dict[str, str]:
        return dict(self._layers.get(resource_name, {}))

    def sources(self, name: str) -> list[tuple[int, str | None]]:
        """Every place `name` has a value, highest precedence first: (ConfigSource, text value)."""
        out = []
        if name in self._layers.get(self._node, {}):
            out.append((DYNAMIC_BROKER, self._layers[self._node][name]))
        if name in self._layers.get(CLUSTER_DEFAULT, {}):
            out.append((DYNAMIC_DEFAULT_BROKER, self._layers[CLUSTER_DEFAULT][name]))
        if not self._config.is_default(name):
            out.append((STATIC_BROKER, config_text(self._static[name])))
        prop = self._properties[name]
        if prop.default is not None:
            default = prop.parse(prop.default) if isinstance(prop.default, str) else prop.default
            out.append((DEFAULT, config_text(default)))
        return out

    def synonyms(self, name: str) -> list[tuple[str, int, str | None]]:
        """(property, ConfigSource, value) of `name` and its synonyms, name by name, each source by
        precedence: the first entry is where the effective setting comes from."""
        return [(n, source, value) for n in SYNONYMS.get(name, (name,)) for source, value in self.sources(n)]

    def validate(self, resource_name: str, overrides: dict[str, str | None]) -> None:
        if resource_name not in (CLUSTER_DEFAULT, self._node):
            raise ConfigRefused(f"Unexpected broker id, expected {self._node} or empty string, but received "
                                f"{resource_name}")
        fixed = sorted(name for name in overrides if name not in DYNAMIC_BROKER_PROPERTIES)
        if fixed:
            raise ConfigRefused(f"Cannot update these configs dynamically: [{', '.join(fixed)}]")
        for name, raw in overrides.items():
            if raw is None:
                raise ConfigRefused(f"Null value not supported for : {name}")
            value = _parse(self._properties, name, raw)
            if name == CORDONED_LOG_DIRS and (reason := cordon_refusal(value, self._static["log.dirs"])):
                raise ConfigRefused(reason)
            if name == "max.connections.per.ip" and value == 0 and not (
                    overrides.get("max.connections.per.ip.overrides") or self._config.props[name + ".overrides"]):
                raise ConfigRefused("max.connections.per.ip can be set to zero only if "
                                    "max.connections.per.ip.overrides property is set.")

    def replace(self, resource_name: str, overrides: dict[str, str]) -> None:
        """Make `overrides` the whole dynamic set of `resource_name` (validated first), durably, and apply."""
        self.validate(resource_name, overrides)
        if overrides:
            self._layers[resource_name] = dict(overrides)
        else:
            self._layers.pop(resource_name, None)
        write_json_atomically(self._path, {"version": 1, "brokers": self._layers})
        self._apply()
        self.on_change()
        log.info("dynamic broker configs of %r now %s", resource_name or "<cluster default>", overrides)

    def replace_layers(self, layers: Mapping[str, Mapping[str, str]]) -> bool:
        """Cluster mode: the dynamic configs as the metadata store has them now (nothing written here).
        True when this node's effective values changed."""
        layers = {name: dict(values) for name, values in layers.items() if values}
        if layers == self._layers:
            return False
        self._layers = layers
        self._apply()
        self.on_change()
        log.info("dynamic broker configs now %s", layers)
        return True

    def _apply(self) -> None:
        for name in DYNAMIC_BROKER_PROPERTIES:
            value = self._static[name]
            for layer in (CLUSTER_DEFAULT, self._node):
                raw = self._layers.get(layer, {}).get(name)
                if raw is not None:
                    try:
                        value = _parse(self._properties, name, raw)
                    except ConfigRefused:  # a file written by hand: keep the static value
                        log.warning("ignoring dynamic %s=%r in %s", name, raw, self._path)
            self._config.props[name] = value


def config_text(value: Any) -> str | None:
    """A typed property value as Kafka shows it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):  # max.connections.per.ip.overrides
        return ",".join(f"{k}:{v}" for k, v in value.items())
    return str(value)
