"""Client quotas: the entities of Describe/AlterClientQuotas (user, client-id, ip and their defaults) and their
quota values, kept durably in log.dirs/kcoord-client-quotas.json (in cluster mode: the metadata store,
kcoord.broker.cluster_quotas).

An entity is a set of (entity type, name) pairs, a name of None meaning the type's default
(`--entity-default`). Validation and messages follow Kafka's controller (metadata/.../controller/
ClientQuotaControlManager.java: validateEntity, configKeysForEntityType, validateQuotaKeyValue) and the
filter of DescribeClientQuotas its image (metadata/.../image/ClientQuotasImage.java: describe, matches).
Which entity's quota applies to a request is `resolve` (DefaultQuotaCallback's precedence, kcoord.broker.quota).
"""
from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from kcoord.metadata.json_file import read_json, write_json_atomically

log = logging.getLogger("kcoord.quotas")

CLIENT_QUOTAS_FILE = "kcoord-client-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE = "request_percentage", "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# key -> its ConfigDef type (QuotaConfig.userAndClientQuotaConfigs / ipConfigs)
USER_AND_CLIENT_KEYS = {PRODUCER_BYTE_RATE: "long", CONSUMER_BYTE_RATE: "long", REQUEST_PERCENTAGE: "double",
                        CONTROLLER_MUTATION_RATE: "double"}
IP_KEYS = {CONNECTION_CREATION_RATE: "int"}
_TYPE_MAX = {"int": 2**31 - 1, "long": 2**63 - 1}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = frozenset[tuple[str, "str | None"]]


class QuotaRefused(ValueError):
    """Refused with INVALID_REQUEST (or `code_name`), with Kafka's message."""

    def __init__(self, message: str, code_name: str = "INVALID_REQUEST") -> None:
        super().__init__(message)
        self.code_name = code_name


def entity_text(entity: Entity) -> str:
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in sorted(entity, key=lambda p: p[0])) + "})"


def validate_entity(pairs: list[tuple[str, str | None]]) -> Entity:
    """The entity of an alteration; QuotaRefused as ClientQuotaControlManager.validateEntity refuses it."""
    if not pairs:
        raise QuotaRefused("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            raise QuotaRefused(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaRefused(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise QuotaRefused(f"Empty {entity_type} not supported")
        seen[entity_type] = name
    return frozenset(seen.items())


def keys_for(entity: Entity) -> dict[str, str]:
    """The quota keys an entity may carry (configKeysForEntityType)."""
    types = dict(entity)
    if IP in types:
        if USER in types or CLIENT_ID in types:
            raise QuotaRefused("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        ip = types[IP]
        if ip is not None:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                raise QuotaRefused(f"{ip} is not a valid IP or resolvable host.") from None
        return IP_KEYS
    return USER_AND_CLIENT_KEYS


def validate_value(keys: dict[str, str], key: str, value: float) -> None:
    """validateQuotaKeyValue: a known key, above 0, whole and in range for an integral type."""
    kind = keys.get(key)
    if kind is None:
        raise QuotaRefused(f"Invalid configuration key {key}")
    if value <= 0.0:
        raise QuotaRefused(f"Quota {key} must be greater than 0")
    if kind in _TYPE_MAX:
        if value > _TYPE_MAX[kind]:
            raise QuotaRefused(f"Proposed value for {key} is too large for {'an INT' if kind == 'int' else 'a LONG'}.")
        if abs(value % 1.0) > 1e-6:
            raise QuotaRefused(f"{key} cannot be a fractional value.")


@dataclass(frozen=True, slots=True)
class Alteration:
    entity: Entity
    ops: list[tuple[str, float | None]]   # (key, value); None removes the key


def parse_filter(components: list[tuple[str, int, str | None]]) -> tuple[dict[str, str | None], set[str]]:
    """(exact matches {type: name or None for the default}, types that must be present): ClientQuotasImage
    .describe's checks, QuotaRefused with its messages (UNSUPPORTED_VERSION for an unknown entity type)."""
    exact: dict[str, str | None] = {}
    present: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise QuotaRefused("Invalid empty entity type.")
        if entity_type in exact or entity_type in present:
            raise QuotaRefused(f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in (IP, USER, CLIENT_ID):
            raise QuotaRefused(f"Unsupported entity type {entity_type}", "UNSUPPORTED_VERSION")
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaRefused("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaRefused("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[entity_type] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaRefused("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            present.add(entity_type)
        else:
            raise QuotaRefused(f"Unknown match type {match_type}")
    named = set(exact) | present
    if IP in named and (USER in named or CLIENT_ID in named):
        raise QuotaRefused("Invalid entity filter component combination. IP filter component should not be used "
                           "with user or clientId filter component.")
    return exact, present


def matches(entity: Entity, exact: dict[str, str | None], present: set[str], strict: bool) -> bool:
    types = dict(entity)
    if strict and len(types) != len(exact) + len(present):
        return False
    return all(t in types and types[t] == name for t, name in exact.items()) and all(t in types for t in present)


def _to_json(entity: Entity) -> list[list]:
    return [[t, n] for t, n in sorted(entity, key=lambda p: p[0])]


Quotas = dict[Entity, dict[str, float]]
Result = tuple[Entity, "str | None", str]  # (entity, error message or None, error code name)


def plan_alterations(current: Quotas, alterations: list[Alteration]) -> tuple[list[Result], Quotas]:
    """Each entity on its own (ClientQuotaControlManager.alterClientQuotas): the per-entity results and the
    quotas after what passed. `current` needs only the altered entities; the rest is passed through."""
    results: list[Result] = []
    changed = {e: dict(q) for e, q in current.items()}
    seen: set[Entity] = set()
    for alteration in alterations:
        entity = alteration.entity
        try:
            if entity in seen:
                raise QuotaRefused(f"Ignoring duplicate entity {entity_text(entity)}")
            seen.add(entity)
            keys = keys_for(entity)
            wanted: dict[str, float | None] = {}
            for key, value in alteration.ops:
                if key in wanted:
                    raise QuotaRefused(f"Duplicate quota key {key} not updating quota for this entity "
                                       f"{entity_text(entity)}")
                wanted[key] = value
            quotas = dict(changed.get(entity, {}))
            for key, value in wanted.items():
                if value is None:
                    quotas.pop(key, None)
                else:
                    validate_value(keys, key, value)
                    quotas[key] = value
        except QuotaRefused as exc:
            results.append((entity, str(exc), exc.code_name))
            continue
        if quotas:
            changed[entity] = quotas
        else:
            changed.pop(entity, None)
        results.append((entity, None, "NONE"))
    return results, changed


class ClientQuotaStore:
    """The one owner of a node's quota entities: {entity: {key: value}}; `on_change()` runs after each
    change (the quota managers re-read their limits). Single-node mode: durable in the file before an
    alteration is answered. Cluster mode (`read_file=False`): the cluster's, as kcoord.broker.cluster_quotas
    follows them from the metadata store into `replace_all`; the file is neither read nor written."""

    def __init__(self, log_dir: str, *, read_file: bool = True) -> None:
        self._path = os.path.join(log_dir, CLIENT_QUOTAS_FILE)
        raw = read_json(self._path, {}).get("entities", []) if read_file else []
        self._quotas: Quotas = {
            frozenset((t, n) for t, n in item["entity"]): dict(item["quotas"]) for item in raw}
        self.on_change: Callable[[], None] = lambda: None

    def quotas(self) -> Quotas:
        return {e: dict(q) for e, q in self._quotas.items()}

    def describe(self, components: list[tuple[str, int, str | None]], strict: bool) -> list[tuple[Entity, dict]]:
        exact, present = parse_filter(components)
        return [(e, dict(q)) for e, q in self._quotas.items() if matches(e, exact, present, strict)]

    def alter(self, alterations: list[Alteration], validate_only: bool) -> list[Result]:
        """plan_alterations over this node's quotas; what passed is applied and written once, unless
        validate_only."""
        results, changed = plan_alterations(self._quotas, alterations)
        if not validate_only and changed != self._quotas:
            self._quotas = changed
            write_json_atomically(self._path, {"version": 1, "entities": [
                {"entity": _to_json(e), "quotas": q} for e, q in sorted(changed.items(), key=lambda i: entity_text(i[0]))]})
            log.info("client quotas now %s", {entity_text(e): q for e, q in changed.items()})
            self.on_change()
        return results

    def replace_all(self, quotas: Quotas) -> None:
        """Cluster mode: every entity's quotas as the metadata store has them now (nothing written here)."""
        quotas = {e: dict(q) for e, q in quotas.items() if q}
        if quotas != self._quotas:
            self._quotas = quotas
            self.on_change()
