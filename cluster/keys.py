"""The cluster's key schema in the metadata store, and the JSON of each value. Pure: no I/O.

Keys are relative to the cluster's prefix (kcoord.etcd.connect's `/PREFIX`), as the store takes them.
ZooKeeper-era Kafka kept the same facts under `/brokers/ids/<id>`, `/controller`,
`/brokers/topics/<t>` and `/brokers/topics/<t>/partitions/<p>/state` (core/.../kafka/zk/ZkData.scala);
here (docs: shared/reference/cluster-design.md §2):

| key                    | value                                              | epoch it carries            |
|------------------------|----------------------------------------------------|-----------------------------|
| `brokers/ids/<id>`     | BrokerInfo: listeners, rack, incarnation, state    | broker epoch = create_revision |
| `controller`           | {"node_id": n}                                     | controller epoch = create_revision |
| `topics/<t>`           | TopicInfo: {"topic_id", "replicas": {p: [ids]}, "configs"} | —                   |
| `topics/<t>/p/<p>`     | PartitionRegistration (kcoord.cluster.partition_state) | partition CAS token = mod_revision |
| `cluster_id`           | the cluster id, text                               | —                           |
| `config/topics/<t>`    | {"topic_id", "configs"}: the topic's changed configs (kcoord.broker.cluster_topic_configs) | — |
| `config/brokers/<n>`   | dynamic broker configs, `<default>` or a node id (kcoord.broker.cluster_configs) | — |
| `config/groups/<g>`    | group configs (kcoord.broker.cluster_configs)      | —                           |
| `config/client-metrics/<name>` | CLIENT_METRICS subscriptions (kcoord.broker.cluster_configs) | —            |
| `config/quotas/users/<u>[/clients/<c>]`, `config/quotas/clients/<c>`, `config/quotas/ips/<ip>` | client quotas (kcoord.broker.cluster_quotas) | — |
| `producer_id_block`    | {"next"}: the next producer-id block's start (kcoord.metadata.producer_ids) | —    |
| `acls/<h>`, `scram/<user>/<mechanism>` | ACLs and SCRAM credentials (kcoord.broker.security.cluster_security) | — |
| `features`             | finalized feature levels and their epoch (kcoord.broker.cluster_features) | —      |

Topic names are Kafka's legal names ([a-zA-Z0-9._-]), so a `/` never appears in one and
`topics/<t>/p/<p>` cannot be mistaken for another topic's key.
"""
from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BROKERS = "brokers/ids/"
CONTROLLER = "controller"
TOPICS = "topics/"
CLUSTER_ID = "cluster_id"
TOPIC_CONFIGS = "config/topics/"  # ZooKeeper-era /config/topics/<t>: written by any node, by compare-and-set
_PARTITIONS = "/p/"


class InvalidValue(ValueError):
    """A stored value that does not decode as its key's schema says."""


def broker_key(broker_id: int) -> str:
    return f"{BROKERS}{broker_id}"


def topic_key(topic: str) -> str:
    return f"{TOPICS}{topic}"


def topic_configs_key(topic: str) -> str:
    return f"{TOPIC_CONFIGS}{topic}"


def partition_key(topic: str, partition: int) -> str:
    return f"{TOPICS}{topic}{_PARTITIONS}{partition}"


def parse_broker_key(key: str) -> int | None:
    """The broker id of a `brokers/ids/<id>` key, else None."""
    if not key.startswith(BROKERS):
        return None
    rest = key[len(BROKERS):]
    return int(rest) if rest.isdigit() else None


def parse_topic_key(key: str) -> tuple[str, int | None] | None:
    """(topic, None) for `topics/<t>`, (topic, p) for `topics/<t>/p/<p>`, else None."""
    if not key.startswith(TOPICS):
        return None
    rest = key[len(TOPICS):]
    name, sep, index = rest.partition(_PARTITIONS)
    if not sep:
        return (rest, None) if rest and "/" not in rest else None
    if not name or not index.isdigit():
        return None
    return name, int(index)


# -- values -----------------------------------------------------------------------------------------


class BrokerState(enum.Enum):
    RUNNING = "running"
    SHUTTING_DOWN = "shutting_down"  # controlled shutdown asked (SIGTERM): may not lead, leaves the ISRs


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One advertised listener, as Kafka's broker registration lists them (name, host, port)."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """The value of `brokers/ids/<id>` (ZooKeeper-era BrokerIdZNode; KRaft's RegisterBrokerRecord)."""

    broker_id: int
    listeners: tuple[Endpoint, ...] = ()
    rack: str | None = None
    incarnation_id: str = ""  # one per process start (KRaft's incarnationId): tells restarts apart
    state: BrokerState = BrokerState.RUNNING
    # every log directory of the broker is cordoned (KIP-1066; KRaft's BrokerRegistration carries its
    # cordoned directories): the controller places no new replica on it
    cordoned: bool = False

    def encode(self) -> bytes:
        return _dump({
            "broker_id": self.broker_id,
            "listeners": [{"name": e.name, "host": e.host, "port": e.port,
                           "security_protocol": e.security_protocol} for e in self.listeners],
            "rack": self.rack,
            "incarnation_id": self.incarnation_id,
            "state": self.state.value,
            "cordoned": self.cordoned,
        })

    @classmethod
    def decode(cls, data: bytes) -> BrokerInfo:
        doc = _load(data, "broker registration")
        try:
            return cls(
                broker_id=_int(doc["broker_id"]),
                listeners=tuple(Endpoint(str(e["name"]), str(e["host"]), _int(e["port"]),
                                         str(e.get("security_protocol", "PLAINTEXT")))
                                for e in doc.get("listeners", [])),
                rack=None if doc.get("rack") is None else str(doc["rack"]),
                incarnation_id=str(doc.get("incarnation_id", "")),
                state=BrokerState(doc.get("state", BrokerState.RUNNING.value)),
                cordoned=doc.get("cordoned", False) is True,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidValue(f"bad broker registration {doc!r}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """The value of `controller` (ZooKeeper-era ControllerZNode: {"brokerid": n}); the epoch is the key's
    create_revision, not a field, so that it cannot be written wrong."""

    node_id: int

    def encode(self) -> bytes:
        return _dump({"node_id": self.node_id})

    @classmethod
    def decode(cls, data: bytes) -> ControllerInfo:
        doc = _load(data, "controller")
        try:
            return cls(_int(doc["node_id"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidValue(f"bad controller value {doc!r}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """The value of `topics/<t>` (ZooKeeper-era TopicZNode: id and assignment), plus its configs."""

    topic_id: uuid.UUID
    replicas: Mapping[int, tuple[int, ...]]
    configs: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        doc: dict[str, Any] = {
            "topic_id": str(self.topic_id),
            "replicas": {str(p): list(r) for p, r in sorted(self.replicas.items())},
        }
        if self.configs:
            doc["configs"] = dict(sorted(self.configs.items()))
        return _dump(doc)

    @classmethod
    def decode(cls, data: bytes) -> TopicInfo:
        doc = _load(data, "topic")
        try:
            return cls(
                topic_id=uuid.UUID(doc["topic_id"]),
                replicas={int(p): tuple(_int(b) for b in r) for p, r in doc["replicas"].items()},
                configs={str(k): str(v) for k, v in doc.get("configs", {}).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidValue(f"bad topic value {doc!r}: {exc}") from exc


def _dump(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidValue(f"a {what} value is JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise InvalidValue(f"a {what} value is a JSON object, not {type(doc).__name__}")
    return doc


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    return value
