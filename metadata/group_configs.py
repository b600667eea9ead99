"""Group-level configs (KIP-848 and after): the GROUP config resource of Incremental/AlterConfigs and
DescribeConfigs, kept durably in log.dirs/kcoord-group-configs.json.

Names, types and bounds follow Kafka's GroupConfig (group-coordinator/.../GroupConfig.java:
validateNames, CONFIG.parse, validateValues); the bounds are the broker's group.consumer.* /
group.share.* / group.streams.* settings, with Kafka's defaults where kcoord has no such property.
The coordinator reads a group's overrides with `group_config(group_id)`; what is not there is the
broker-level default. In cluster mode the overrides are the cluster's (kcoord.broker.cluster_configs
follows them from the metadata store into `replace_all`; the file is not read), so the coordinator of a
group, on whichever node, sees a change made through any node.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any

from kcoord.metadata.json_file import read_json, write_json_atomically

log = logging.getLogger("kcoord.configs")

GROUP_CONFIGS_FILE = "kcoord-group-configs.json"
MAX_INT = 2**31 - 1


class ConfigInvalid(ValueError):
    """A name or value Kafka refuses with INVALID_CONFIG (InvalidConfigurationException / ConfigException)."""


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: str               # "int" | "string" (Kafka's ConfigDef.Type)
    default: Any
    at_least: int | None = None
    # (broker property holding the lower bound, Kafka's default), same for the upper bound
    low: tuple[str, int] | None = None
    high: tuple[str, int] | None = None
    choices: tuple[str, ...] | None = None
    doc: str = ""


def _bounded(name, default, low, high, doc, at_least=1):
    return GroupConfigDef(name, "int", default, at_least, low, high, doc=doc)


GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {d.name: d for d in (
    _bounded("consumer.session.timeout.ms", 45000, ("group.consumer.min.session.timeout.ms", 45000),
             ("group.consumer.max.session.timeout.ms", 60000), "The timeout to detect client failures."),
    _bounded("consumer.heartbeat.interval.ms", 5000, ("group.consumer.min.heartbeat.interval.ms", 5000),
             ("group.consumer.max.heartbeat.interval.ms", 15000), "The heartbeat interval given to the members."),
    _bounded("share.session.timeout.ms", 45000, ("group.share.min.session.timeout.ms", 45000),
             ("group.share.max.session.timeout.ms", 60000), "The timeout to detect share consumer failures."),
    _bounded("share.heartbeat.interval.ms", 5000, ("group.share.min.heartbeat.interval.ms", 5000),
             ("group.share.max.heartbeat.interval.ms", 15000), "The heartbeat interval of share consumers."),
    _bounded("share.record.lock.duration.ms", 30000, ("group.share.min.record.lock.duration.ms", 15000),
             ("group.share.max.record.lock.duration.ms", 60000), "The record acquisition lock duration.",
             at_least=1000),
    GroupConfigDef("share.auto.offset.reset", "string", "latest",
                   doc="The strategy to initialize the share-partition start offset."),
    GroupConfigDef("share.isolation.level", "string", "read_uncommitted",
                   choices=("read_committed", "read_uncommitted"), doc="How transactional records are read."),
    _bounded("streams.session.timeout.ms", 45000, ("group.streams.min.session.timeout.ms", 45000),
             ("group.streams.max.session.timeout.ms", 60000), "The timeout to detect streams client failures."),
    _bounded("streams.heartbeat.interval.ms", 5000, ("group.streams.min.heartbeat.interval.ms", 5000),
             ("group.streams.max.heartbeat.interval.ms", 15000), "The heartbeat interval of streams members."),
    _bounded("streams.num.standby.replicas", 0, None, ("group.streams.max.standby.replicas", 2),
             "The number of standby replicas for each task.", at_least=0),
    _bounded("streams.initial.rebalance.delay.ms", 3000, None, None,
             "How long the first rebalance of a streams group waits.", at_least=0),
)}
# Pairs Kafka checks after the bounds: the session timeout must exceed the heartbeat interval.
_SESSION_ABOVE_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                            ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                            ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))
_ISO_DURATION = re.compile(r"P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?", re.IGNORECASE)


def _broker_setting(config: Any, name: str, default: int) -> int:
    try:
        return int(config.get(name))
    except (KeyError, ValueError, TypeError):  # kcoord has no such property: Kafka's default
        return default


def parse_value(d: GroupConfigDef, raw: str) -> Any:
    if d.type == "int":
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigInvalid(f"Invalid value {raw} for configuration {d.name}: Not a number of type INT") from None
        if not -2**31 <= value <= MAX_INT:
            raise ConfigInvalid(f"Invalid value {raw} for configuration {d.name}: Not a number of type INT")
        if d.at_least is not None and value < d.at_least:
            raise ConfigInvalid(f"Invalid value {value} for configuration {d.name}: Value must be at least {d.at_least}")
        return value
    value = raw.strip()
    if d.choices is not None and value not in d.choices:
        raise ConfigInvalid(f"Invalid value {value} for configuration {d.name}: String must be one of: "
                            + ", ".join(d.choices))
    if d.name == "share.auto.offset.reset":
        kind, _, duration = value.partition(":")
        if not (value in ("latest", "earliest") or (kind == "by_duration" and _ISO_DURATION.fullmatch(duration))):
            raise ConfigInvalid(f"Invalid value {value} for configuration {d.name}")
    return value


def validate_group_configs(overrides: dict[str, str], broker_config: Any) -> dict[str, Any]:
    """Kafka's GroupConfig.validate: names, then parsed values over the defaults, then the broker's bounds.
    Returns the typed overrides; raises ConfigInvalid."""
    for name in overrides:
        if name not in GROUP_CONFIG_DEFS:
            raise ConfigInvalid(f"Unknown group config name: {name}")
    typed = {name: parse_value(GROUP_CONFIG_DEFS[name], raw) for name, raw in overrides.items()}
    values = {name: typed.get(name, d.default) for name, d in GROUP_CONFIG_DEFS.items()}
    for name, d in GROUP_CONFIG_DEFS.items():
        if d.low is not None and values[name] < _broker_setting(broker_config, *d.low):
            raise ConfigInvalid(f"{name} must be greater than or equal to {d.low[0]}")
        if d.high is not None and values[name] > _broker_setting(broker_config, *d.high):
            raise ConfigInvalid(f"{name} must be less than or equal to {d.high[0]}")
    for session, heartbeat in _SESSION_ABOVE_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise ConfigInvalid(f"{session} must be greater than {heartbeat}")
    return typed


class GroupConfigStore:
    """The one owner of group-level overrides: {group id: {name: text value}}, durable before a change
    is answered."""

    def __init__(self, log_dir: str, broker_config: Any, *, read_file: bool = True) -> None:
        self._path = os.path.join(log_dir, GROUP_CONFIGS_FILE)
        self._broker_config = broker_config
        self._groups: dict[str, dict[str, str]] = read_json(self._path, {}).get("groups", {}) if read_file else {}

    def group_config(self, group_id: str) -> dict[str, Any]:
        """The group's overrides, typed ({"consumer.session.timeout.ms": 50000}); {} when none are set."""
        raw = self._groups.get(group_id, {})
        return {name: parse_value(GROUP_CONFIG_DEFS[name], value) for name, value in raw.items()
                if name in GROUP_CONFIG_DEFS}

    def group_ids(self) -> list[str]:
        """The groups that have overrides (ListConfigResources' GROUP resources), sorted."""
        return sorted(self._groups)

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._groups.get(group_id, {}))

    def validate(self, group_id: str, overrides: dict[str, str]) -> None:
        if not group_id:
            raise ConfigInvalid("Group id must not be empty")  # Kafka: InvalidRequest for an empty name
        validate_group_configs(overrides, self._broker_config)

    def replace(self, group_id: str, overrides: dict[str, str]) -> None:
        """Make `overrides` the group's whole set (validated first), durably."""
        self.validate(group_id, overrides)
        if overrides:
            self._groups[group_id] = dict(overrides)
        else:
            self._groups.pop(group_id, None)
        write_json_atomically(self._path, {"version": 1, "groups": self._groups})
        log.info("group %s configs now %s", group_id, overrides)

    def replace_all(self, groups: dict[str, dict[str, str]]) -> None:
        """Cluster mode: every group's overrides as the metadata store has them now (nothing written here)."""
        self._groups = {g: dict(o) for g, o in groups.items() if o}
