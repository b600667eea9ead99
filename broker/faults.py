"""Fault specifications: what a fault matches and when it fires. Pure: no I/O, no event loop.

A fault, as the admin endpoint and `kcoord faults` take it (JSON):

    {"api": "Heartbeat",            # API name or key (required); "version": N narrows to one version
     "action": "error",             # "error" (answer with `error`), "delay" (`delay_ms`, then serve
                                    #  normally), "close" (close the connection, no answer), or
                                    #  "throttle" (serve normally, the answer's throttle_time_ms is
                                    #  `throttle_ms` and the connection is muted that long: KIP-219)
     "error": "REBALANCE_IN_PROGRESS",   # name or code, for "error"
     "delay_ms": 0,                 # for "delay"; with "error" or "close" it waits first
     "throttle_ms": 0,              # for "throttle"
     "group_id": "...", "topic": "...", "client_id": "...", "member_id": "...",   # optional matchers
     "after": 0,                    # let the first N matching requests through
     "count": 3,                    # then fire on the next N (absent/null: every match)
     "probability": 1.0, "seed": 0} # fire on a match with this probability (seeded: deterministic)

`FaultSpec.parse` rejects anything else with a FaultError naming the field, so a bad request changes
nothing. `Fault.decide(request_facts)` is the whole firing rule.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

ACTIONS = ("error", "delay", "close", "throttle")
MATCHERS = ("group_id", "topic", "client_id", "member_id")
FIELDS = {"api", "version", "action", "error", "delay_ms", "throttle_ms", "after", "count", "probability", "seed",
          *MATCHERS}
MAX_DELAY_MS = 3_600_000  # an hour: longer is a typo, and would pin a connection past any test


class FaultError(ValueError):
    """A fault specification that cannot be used; the message names the field."""


def _int_field(raw: dict, name: str, default: int | None, lo: int, hi: int = 2**31 - 1) -> int | None:
    value = raw.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise FaultError(f"{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise FaultError(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def _api_key(value: Any) -> int:
    if isinstance(value, str) and value in m.API_KEYS:
        return m.API_KEYS[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in m.API_KEYS.values():
        return value
    raise FaultError(f"api: unknown API {value!r} (one of: {', '.join(sorted(m.API_KEYS))})")


def _error_code(value: Any) -> ErrorCode:
    try:
        if isinstance(value, str):
            return ErrorCode[value.upper()]
        if isinstance(value, int) and not isinstance(value, bool):
            return ErrorCode(value)
    except (KeyError, ValueError):
        pass
    raise FaultError(f"error: unknown error code {value!r} (a Kafka error name such as NOT_COORDINATOR, or its code)")


@dataclass(frozen=True)
class FaultSpec:
    api_key: int
    action: str
    version: int | None = None
    error: ErrorCode = ErrorCode.NONE
    delay_ms: int = 0
    after: int = 0
    count: int | None = None
    probability: float = 1.0
    seed: int = 0
    match: dict[str, str] = field(default_factory=dict)  # matcher name -> value
    throttle_ms: int = 0

    @classmethod
    def parse(cls, raw: Any) -> FaultSpec:
        if not isinstance(raw, dict):
            raise FaultError("a fault is a JSON object")
        unknown = sorted(set(raw) - FIELDS)
        if unknown:
            raise FaultError(f"unknown field(s): {', '.join(unknown)} (known: {', '.join(sorted(FIELDS))})")
        if "api" not in raw:
            raise FaultError("api is required")
        api_key = _api_key(raw["api"])
        action = raw.get("action", "error" if "error" in raw else None)
        if action not in ACTIONS:
            raise FaultError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
        version = _int_field(raw, "version", None, 0, 32767)
        error = ErrorCode.NONE
        if action == "error":
            if "error" not in raw:
                raise FaultError("error is required when action is \"error\"")
            error = _error_code(raw["error"])
            if error == ErrorCode.NONE:
                raise FaultError("error: NONE is not a fault")
        elif "error" in raw:
            raise FaultError(f"error is only for action \"error\", not {action!r}")
        delay_ms = _int_field(raw, "delay_ms", 0, 0, MAX_DELAY_MS)
        if action == "delay" and not delay_ms:
            raise FaultError("delay_ms (> 0) is required when action is \"delay\"")
        throttle_ms = _int_field(raw, "throttle_ms", 0, 0, MAX_DELAY_MS)
        if (action == "throttle") != bool(throttle_ms):
            raise FaultError("throttle_ms (> 0) is required when action is \"throttle\", and only then")
        probability = raw.get("probability", 1.0)
        if isinstance(probability, bool) or not isinstance(probability, int | float) or not 0 < probability <= 1:
            raise FaultError(f"probability must be a number in (0, 1], got {probability!r}")
        match = {}
        for name in MATCHERS:
            if raw.get(name) is not None:
                if not isinstance(raw[name], str):
                    raise FaultError(f"{name} must be a string, got {raw[name]!r}")
                match[name] = raw[name]
        return cls(api_key, action, version, error, delay_ms, _int_field(raw, "after", 0, 0),
                   _int_field(raw, "count", None, 1), float(probability),
                   _int_field(raw, "seed", 0, -(2**63), 2**63 - 1), match, throttle_ms or 0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"api": m.api_name(self.api_key), "action": self.action}
        if self.version is not None:
            out["version"] = self.version
        if self.action == "error":
            out["error"] = self.error.name
        if self.delay_ms:
            out["delay_ms"] = self.delay_ms
        if self.throttle_ms:
            out["throttle_ms"] = self.throttle_ms
        out.update(self.match)
        out.update(after=self.after, count=self.count, probability=self.probability, seed=self.seed)
        return out


@dataclass
class RequestFacts:
    """What a fault can match on, taken from one request (see request_facts)."""
    api_key: int
    version: int
    client_id: str
    group_ids: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    member_ids: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"{m.api_name(self.api_key)} v{self.version}", f"client_id={self.client_id!r}"]
        if self.group_ids:
            parts.append("group_id=" + ",".join(self.group_ids))
        if self.member_ids:
            parts.append("member_id=" + ",".join(self.member_ids))
        if self.topics:
            parts.append("topic=" + ",".join(self.topics))
        return " ".join(parts)


class Fault:
    """One installed fault with its counters. `decide` says whether this request is hit."""

    def __init__(self, fault_id: int, spec: FaultSpec) -> None:
        self.id = fault_id
        self.spec = spec
        self.matched = 0
        self.fired = 0
        self._random = random.Random(spec.seed)

    @property
    def exhausted(self) -> bool:
        return self.spec.count is not None and self.fired >= self.spec.count

    def matches(self, facts: RequestFacts) -> bool:
        spec = self.spec
        if facts.api_key != spec.api_key or (spec.version is not None and facts.version != spec.version):
            return False
        wanted = spec.match
        if "client_id" in wanted and facts.client_id != wanted["client_id"]:
            return False
        if "group_id" in wanted and wanted["group_id"] not in facts.group_ids:
            return False
        if "topic" in wanted and wanted["topic"] not in facts.topics:
            return False
        return not ("member_id" in wanted and wanted["member_id"] not in facts.member_ids)

    def decide(self, facts: RequestFacts) -> bool:
        """Count a match and say whether the fault fires on it (after, then probability, then count)."""
        if self.exhausted or not self.matches(facts):
            return False
        self.matched += 1
        if self.matched <= self.spec.after:
            return False
        # Drawn for every eligible match, so the sequence of hits depends only on the seed.
        if self.spec.probability < 1.0 and self._random.random() >= self.spec.probability:
            return False
        self.fired += 1
        return True

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **self.spec.to_json(), "matched": self.matched, "fired": self.fired,
                "exhausted": self.exhausted}


def request_facts(api_key: int, version: int, client_id: str | None, request: Any) -> RequestFacts:
    """The group ids, topics and member ids a request names, wherever its API keeps them."""
    groups: list[str] = []
    topics: list[str] = []
    members: list[str] = []
    group_id = getattr(request, "group_id", None)
    if isinstance(group_id, str):
        groups.append(group_id)
    for name in ("groups", "groups_names"):  # DescribeGroups / DeleteGroups / OffsetFetch v8+
        for g in getattr(request, name, None) or ():
            groups.append(g if isinstance(g, str) else getattr(g, "group_id", ""))
    if api_key == m.API_KEYS["FindCoordinator"]:
        key = getattr(request, "key", None)
        keys = [key] if key else []
        groups.extend(keys + list(getattr(request, "coordinator_keys", None) or ()))
    member_id = getattr(request, "member_id", None)
    if isinstance(member_id, str) and member_id:
        members.append(member_id)
    for member in getattr(request, "members", None) or ():  # LeaveGroup v3+
        if getattr(member, "member_id", None):
            members.append(member.member_id)
    for name in ("topics", "topic_data"):
        for t in getattr(request, name, None) or ():
            topic = t if isinstance(t, str) else getattr(t, "name", None) or getattr(t, "topic", None)
            if topic:
                topics.append(topic)
    for g in getattr(request, "groups", None) or ():  # OffsetFetch v8+: topics per group
        for t in getattr(g, "topics", None) or ():
            if getattr(t, "name", None):
                topics.append(t.name)
    return RequestFacts(api_key, version, client_id or "", tuple(groups), tuple(topics), tuple(members))
