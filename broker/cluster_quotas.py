"""Cluster mode's client quotas (KIP-546): in the metadata store, followed by every node.

Kafka 4 keeps them as ClientQuotaRecords in the metadata log, which every broker follows
(ClientQuotaMetadataManager feeding its ClientQuotaManagers); ZooKeeper-era Kafka had one znode per
entity under `/config` (ZkData.scala's ConfigEntityZNode, names sanitized, `<default>` for a default).
Here, with that layout under `config/quotas/`:

| key                                       | value                                   |
|-------------------------------------------|-----------------------------------------|
| `config/quotas/users/<user>`              | the entity's quotas, JSON {key: value}  |
| `config/quotas/clients/<client id>`       |                                         |
| `config/quotas/users/<user>/clients/<client id>` |                                  |
| `config/quotas/ips/<ip>`                  |                                         |

(names percent-encoded, `<default>` for the entity type's default). AlterClientQuotas through any node
reads the altered entities' keys, plans the change on them (metadata/client_quotas.py's pure rules) and
writes it on the condition that none of those keys changed since it read them (a concurrent alteration
of the same entity through another node is not lost: the loser plans again); the node answers once its
own copy has it, and every node hands the whole mapping to its ClientQuotaStore, whose change rebuilds
the produce, fetch and request quota managers.
"""
from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Mapping

from kcoord.metadata.client_quotas import (
    CLIENT_ID,
    IP,
    USER,
    Alteration,
    ClientQuotaStore,
    Entity,
    Quotas,
    Result,
    plan_alterations,
)
from kcoord.metadata.prefix_follower import PrefixFollower
from kcoord.metadata.store import (
    Compare,
    Delete,
    Get,
    KeyValue,
    MetadataStore,
    Op,
    Put,
    StoreError,
    absent,
    modified_at,
)

log = logging.getLogger("kcoord.cluster.quotas")

PREFIX = "config/quotas/"
DEFAULT_NAME = "<default>"  # ZooKeeper-era ConfigEntityName.DEFAULT
MAX_ATTEMPTS = 10
_SEGMENT = {USER: "users", CLIENT_ID: "clients", IP: "ips"}
_TYPE = {segment: entity_type for entity_type, segment in _SEGMENT.items()}


class QuotasKeptChanging(StoreError):
    """Every attempt found an altered entity changed under it by another node."""


def _encode_name(name: str | None) -> str:
    return DEFAULT_NAME if name is None else urllib.parse.quote(name, safe="")


def _decode_name(text: str) -> str | None:
    return None if text == DEFAULT_NAME else urllib.parse.unquote(text)


def entity_key(entity: Entity) -> str | None:
    """The key (relative to PREFIX) of an entity of a stored shape, else None (e.g. ip with user: refused
    by the rules before anything is written)."""
    types = dict(entity)
    if set(types) == {USER, CLIENT_ID}:
        return f"users/{_encode_name(types[USER])}/clients/{_encode_name(types[CLIENT_ID])}"
    if len(types) == 1:
        ((entity_type, name),) = types.items()
        return f"{_SEGMENT[entity_type]}/{_encode_name(name)}"
    return None


def parse_entity_key(key: str) -> Entity | None:
    parts = key.split("/")
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return frozenset({(USER, _decode_name(parts[1])), (CLIENT_ID, _decode_name(parts[3]))})
    if len(parts) == 2 and parts[0] in _TYPE:
        return frozenset({(_TYPE[parts[0]], _decode_name(parts[1]))})
    return None


def encode_quotas(quotas: Mapping[str, float]) -> bytes:
    return json.dumps(dict(sorted(quotas.items())), separators=(",", ":")).encode()


def decode_quotas(value: bytes) -> dict[str, float]:
    return {str(k): float(v) for k, v in json.loads(value).items()}


def decode(values: Mapping[str, bytes]) -> Quotas:
    """Every entity's quotas (keys relative to PREFIX); a key or value that does not decode is logged and
    skipped (one bad key must not drop every other quota)."""
    quotas: Quotas = {}
    for key, value in values.items():
        entity = parse_entity_key(key)
        try:
            if entity is None:
                raise ValueError("not a quota entity's key")
            quotas[entity] = decode_quotas(value)
        except (ValueError, TypeError, AttributeError) as exc:
            log.error("ignoring the bad value of %s%s: %s", PREFIX, key, exc)
    return quotas


class ClusterClientQuotas:
    def __init__(self, store: MetadataStore, quotas: ClientQuotaStore) -> None:
        self._store = store
        self._quotas = quotas
        self.follower = PrefixFollower(store, PREFIX, lambda values: quotas.replace_all(decode(values)))

    async def start(self) -> None:
        await self.follower.start()

    async def close(self) -> None:
        await self.follower.close()

    async def alter(self, alterations: list[Alteration], validate_only: bool) -> list[Result]:
        """plan_alterations' results, what passed made in the metadata store (StoreError: not made)."""
        keys = {a.entity: key for a in alterations if (key := entity_key(a.entity)) is not None}
        wanted = sorted(set(keys.values()))
        for _ in range(MAX_ATTEMPTS):
            # planned against the stored values, read at one revision, not a lagging copy
            read = await self._store.txn([], [Get(PREFIX + key) for key in wanted])
            stored: dict[str, KeyValue | None] = {key: None for key in wanted}
            for kvs in read.responses:
                assert isinstance(kvs, tuple)
                for kv in kvs:
                    stored[kv.key[len(PREFIX):]] = kv
            current = decode({key: kv.value for key, kv in stored.items() if kv is not None})
            results, planned = plan_alterations(current, alterations)
            if validate_only or planned == current:
                return results
            compares: list[Compare] = []
            ops: list[Op] = []
            for entity in set(current) | set(planned):
                if current.get(entity) == planned.get(entity):
                    continue
                key, kv = keys[entity], stored[keys[entity]]
                compares.append(absent(PREFIX + key) if kv is None else modified_at(PREFIX + key, kv.mod_revision))
                new = planned.get(entity)
                ops.append(Put(PREFIX + key, encode_quotas(new)) if new else Delete(PREFIX + key))
            result = await self._store.txn(compares, ops)
            if result.succeeded:
                await self.follower.see_own_write(result.revision)  # answered once this node's copy has it
                return results
        raise QuotasKeptChanging("the altered client quota entities kept changing under this alteration")
