"""Client metrics subscriptions (KIP-714): the CLIENT_METRICS config resource of Incremental/AlterConfigs,
DescribeConfigs and ListConfigResources, kept durably in log.dirs/kcoord-client-metrics.json (in cluster mode:
the metadata store's `config/client-metrics/<name>`, kcoord.broker.cluster_configs).

A resource is a named subscription: `metrics` (a list of metric-name prefixes, `*` for all), `interval.ms`
(the push interval, 100 ms to 1 hour, default 5 minutes) and `match` (a list of `selector=regex`, every one
of which must match the whole of the client's value). Names, bounds and error messages follow Kafka's
ClientMetricsConfigs (server/.../metrics/ClientMetricsConfigs.java: validate, parseMatchingPatterns).
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from kcoord.metadata.json_file import read_json, write_json_atomically

log = logging.getLogger("kcoord.configs")

CLIENT_METRICS_FILE = "kcoord-client-metrics.json"
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_SELECTORS = frozenset({"client_instance_id", "client_id", "client_software_name",
                             "client_software_version", "client_source_address", "client_source_port"})
DOCS = {METRICS: "Subscription metrics list", INTERVAL_MS: "Push interval in milliseconds",
        MATCH: "Client match pattern list"}
DEFAULTS = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}


class ClientMetricsConfigInvalid(ValueError):
    """Refused as Kafka refuses it: `code_name` is INVALID_REQUEST or INVALID_CONFIG."""

    def __init__(self, code_name: str, message: str) -> None:
        super().__init__(message)
        self.code_name = code_name


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: dict[str, str]) -> bool:
        """Every selector's pattern matches the whole of the client's value (Java's Matcher.matches)."""
        return all(pattern.fullmatch(client.get(selector) or "") is not None for selector, pattern in self.match)


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_match(patterns: list[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for pattern in patterns:
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise ClientMetricsConfigInvalid("INVALID_CONFIG", f"Illegal client matching pattern: {pattern}")
        try:
            out.append((parts[0].strip(), re.compile(parts[1].strip())))
        except re.error:
            raise ClientMetricsConfigInvalid("INVALID_CONFIG", f"Illegal client matching pattern: {pattern}") from None
    return tuple(out)


def parse_subscription(name: str, configs: dict[str, str]) -> Subscription:
    """The typed subscription; ClientMetricsConfigInvalid as Kafka's validate refuses it."""
    if not name:
        raise ClientMetricsConfigInvalid("INVALID_REQUEST", "Subscription name can't be empty")
    for key in configs:
        if key not in DOCS:
            raise ClientMetricsConfigInvalid("INVALID_REQUEST", f"Unknown client metrics configuration: {key}")
    interval = DEFAULT_INTERVAL_MS
    if INTERVAL_MS in configs:
        try:
            interval = int(configs[INTERVAL_MS].strip())
        except ValueError:
            raise ClientMetricsConfigInvalid(
                "INVALID_CONFIG", f"Invalid value {configs[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                "Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ClientMetricsConfigInvalid(
                "INVALID_REQUEST", f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 "
                "and 3600000 (1 hour)")
    return Subscription(name, tuple(_list(configs.get(METRICS, ""))), interval,
                        parse_match(_list(configs.get(MATCH, ""))))


class ClientMetricsConfigStore:
    """The one owner of the CLIENT_METRICS resources: {name: {config: text}}, durable before a change is
    answered; `on_change()` is called after each change (the telemetry manager re-reads its subscriptions).
    Cluster mode (`read_file=False`): the cluster's, followed from the metadata store into `replace_all`."""

    def __init__(self, log_dir: str, *, read_file: bool = True) -> None:
        self._path = os.path.join(log_dir, CLIENT_METRICS_FILE)
        self._resources: dict[str, dict[str, str]] = (
            read_json(self._path, {}).get("resources", {}) if read_file else {})
        self.on_change: Callable[[], None] = lambda: None

    def names(self) -> list[str]:
        return sorted(self._resources)

    def overrides(self, name: str) -> dict[str, str]:
        return dict(self._resources.get(name, {}))

    def subscriptions(self) -> list[Subscription]:
        return [parse_subscription(name, configs) for name, configs in sorted(self._resources.items())]

    def validate(self, name: str, configs: dict[str, str]) -> None:
        parse_subscription(name, configs)

    def replace(self, name: str, configs: dict[str, str]) -> None:
        """Make `configs` the resource's whole set (no configs: the resource is gone), durably."""
        self.validate(name, configs)
        if configs:
            self._resources[name] = dict(configs)
        else:
            self._resources.pop(name, None)
        write_json_atomically(self._path, {"version": 1, "resources": self._resources})
        log.info("client metrics subscription %s now %s", name, configs)
        self.on_change()

    def replace_all(self, resources: dict[str, dict[str, str]]) -> None:
        """Cluster mode: every resource as the metadata store has them now (nothing written here); one that
        does not validate is logged and left out, so the others' subscriptions still serve."""
        kept: dict[str, dict[str, str]] = {}
        for name, configs in resources.items():
            try:
                self.validate(name, configs)
            except ClientMetricsConfigInvalid as exc:
                log.error("ignoring client metrics subscription %s: %s", name, exc)
                continue
            if configs:
                kept[name] = dict(configs)
        if kept != self._resources:
            self._resources = kept
            self.on_change()
