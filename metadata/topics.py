"""Topics: name, stable topic id, partition count, config overrides; creation, deletion, auto-creation.

The partition logs belong to storage; this module owns what Kafka keeps in its controller metadata.
That metadata is one small JSON file in log.dirs, rewritten atomically (write, fsync, rename) before
any partition of a new topic exists, so a topic id never changes across restarts.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from kcoord.coordinator.core import OFFSETS_TOPIC
from kcoord.metadata.cordoned_log_dirs import CORDONED_LOG_DIRS, is_cordoned
from kcoord.metadata.json_file import write_json_atomically
from kcoord.protocol.errors import ErrorCode

log = logging.getLogger("kcoord.topics")

CONSUMER_OFFSETS = OFFSETS_TOPIC  # kcoord.coordinator.core owns the name
TRANSACTION_STATE = "__transaction_state"  # kcoord.txn.state_manager.TRANSACTION_STATE_TOPIC
METADATA_FILE = "kcoord-topics.json"
MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_PARTITIONS = 100_000

# Topic-level configs we honour, with the broker property that gives the default.
TOPIC_CONFIG_DEFAULTS = {
    "cleanup.policy": "log.cleanup.policy",
    "retention.ms": None,                  # derived: config.log_retention_ms
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": None,                    # derived: config.log_roll_ms
    "message.timestamp.type": "log.message.timestamp.type",
    "max.message.bytes": "message.max.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "index.interval.bytes": "log.index.interval.bytes",
    "compression.type": None,              # "producer": batches are stored as sent
    "min.insync.replicas": None,           # single node: 1
    "unclean.leader.election.enable": None,
}
_TOPIC_VALUE_CHECKS = {
    "cleanup.policy": lambda v: set(v.split(",")) <= {"delete", "compact"},
    "message.timestamp.type": lambda v: v in ("CreateTime", "LogAppendTime"),
    "compression.type": lambda v: v in ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    "unclean.leader.election.enable": lambda v: v in ("true", "false"),
    "min.cleanable.dirty.ratio": lambda v: 0.0 <= float(v) <= 1.0,
}


def consumer_offsets_configs(config: Any) -> dict[str, str]:
    """The topic configs __consumer_offsets always has, as Kafka gives it (offsets.topic.* properties):
    compacted, so retention never deletes coordinator state."""
    return {"cleanup.policy": "compact", "segment.bytes": str(config.get("offsets.topic.segment.bytes"))}


def transaction_state_configs(config: Any) -> dict[str, str]:
    """__transaction_state as Kafka creates it (transaction.state.log.* properties): compacted."""
    return {"cleanup.policy": "compact", "segment.bytes": str(config.get("transaction.state.log.segment.bytes"))}


def internal_configs(config: Any, name: str) -> dict[str, str]:
    return transaction_state_configs(config) if name == TRANSACTION_STATE else consumer_offsets_configs(config)


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # overrides only

    @property
    def internal(self) -> bool:
        return self.name in (CONSUMER_OFFSETS, TRANSACTION_STATE)


def validate_topic_name(name: str | None) -> None:
    """Kafka's Topic.validate: 1-249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL_NAME.fullmatch(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name \"{name}\" is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


def validate_topic_configs(configs: dict[str, str | None]) -> None:
    for key, value in configs.items():
        if key not in TOPIC_CONFIG_DEFAULTS:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
        if value is None:
            continue
        check = _TOPIC_VALUE_CHECKS.get(key)
        try:
            ok = check(value) if check else int(value) >= -1
        except ValueError:
            ok = False
        if not ok:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {key}")


def broker_default(config: Any, key: str) -> str:
    """The effective default of topic config `key` from broker properties, as Kafka shows it."""
    if key == "retention.ms":
        return str(config.log_retention_ms)
    if key == "segment.ms":
        return str(config.log_roll_ms)
    if key == "compression.type":
        return "producer"
    if key == "min.insync.replicas":
        return str(config.get("min.insync.replicas"))
    if key == "unclean.leader.election.enable":
        return "false"
    value = config.get(TOPIC_CONFIG_DEFAULTS[key])
    return str(value)


def log_config_for(config: Any, overrides: dict[str, str]) -> Any:
    """A kcoord.storage.LogConfig with the broker defaults and the topic's overrides applied."""
    from kcoord.storage import LogConfig

    def eff(key: str) -> str:
        return overrides.get(key) or broker_default(config, key)

    wanted = {
        "segment_bytes": int(eff("segment.bytes")),
        "segment_ms": int(eff("segment.ms")),
        "retention_ms": int(eff("retention.ms")),
        "retention_bytes": int(eff("retention.bytes")),
        "cleanup_policy": eff("cleanup.policy"),
        "message_timestamp_type": eff("message.timestamp.type"),
        "max_message_bytes": int(eff("max.message.bytes")),
        "flush_on_append": config.get("log.flush.interval.messages") <= 1,
        "index_interval_bytes": int(eff("index.interval.bytes")),
        "delete_retention_ms": int(eff("delete.retention.ms")),
        "min_cleanable_dirty_ratio": float(eff("min.cleanable.dirty.ratio")),
    }
    if dataclasses.is_dataclass(LogConfig):
        names = {f.name for f in dataclasses.fields(LogConfig)}
        return LogConfig(**{k: v for k, v in wanted.items() if k in names})
    return LogConfig()


class TopicManager:
    """The one owner of topic metadata. Handlers call it; it calls storage."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.config = broker.config
        self.logs = broker.logs
        self._path = os.path.join(broker.log_dir, METADATA_FILE)
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        # Bumped by every saved change and kept in the file: a monotonic stand-in for the offset of
        # Kafka's metadata image (consumer groups record the version a regex was resolved at).
        self.metadata_version = 0
        # kcoord.etcd.connect set: partitions live where the cluster's metadata places them
        self.cluster_mode = broker.config.get("kcoord.etcd.connect") is not None
        self._load()

    # -- persistence ------------------------------------------------------------------------------
    def _load(self) -> None:
        have_metadata = os.path.exists(self._path)
        if have_metadata:
            with open(self._path, encoding="utf-8") as fh:
                data = json.load(fh)
            self.metadata_version = int(data.get("metadata_version", 0))
            for item in data.get("topics", []):
                self._add(Topic(item["name"], uuid.UUID(item["id"]), int(item["partitions"]),
                                dict(item.get("configs", {}))))
        on_disk: dict[str, int] = {}
        for topic, partition in self.logs.partitions():
            on_disk[topic] = max(on_disk.get(topic, 0), partition + 1)
        adopted = False
        for name, count in on_disk.items():
            if name in self._topics:
                continue
            if have_metadata:
                # Deletion writes the metadata first, then removes the partitions: these are the
                # leftovers of a deletion cut short by a crash. Finish it.
                log.warning("finishing the interrupted deletion of topic %s", name)
                self.logs.delete_topic(name)
            else:
                # No metadata at all (a data directory from an older kcoord or another tool):
                # adopt the partitions so their data stays reachable.
                log.warning("adopting topic %s found on disk with %d partitions", name, count)
                configs = internal_configs(self.config, name) if name in (CONSUMER_OFFSETS, TRANSACTION_STATE) else {}
                self._add(Topic(name, uuid.uuid4(), count, configs))
                adopted = True
        if adopted:
            self._save()
        if self.cluster_mode:
            return  # the cluster node opens the partitions this node holds, as the metadata assigns them
        for topic in self._topics.values():
            self._open_partitions(topic)

    def _save(self) -> None:
        self.metadata_version += 1
        write_json_atomically(self._path, {"version": 1, "metadata_version": self.metadata_version, "topics": [
            {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
            for t in self._topics.values()]})

    def _add(self, topic: Topic) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def _open_partitions(self, topic: Topic) -> None:
        cfg = self.log_config_of(topic)  # internal topics: their configs whatever the metadata says (or lacks)
        for p in range(topic.partitions):
            self.logs.get_or_create(topic.name, p, config=cfg)

    def mirror(self, name: str, topic_id: uuid.UUID, partitions: int, configs: dict[str, str]) -> Topic:
        """Cluster mode (kcoord.cluster.node): the cluster's topic as this node's handlers see it: its id,
        partition count and configs come from the cluster metadata, not from this node. Saved like any
        change so the id survives a restart before the metadata is read again; logs are not opened here
        (the node opens the partitions it holds)."""
        topic = self._topics.get(name)
        if topic is not None and (topic.topic_id, topic.partitions, topic.configs) == (topic_id, partitions, configs):
            return topic
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
        topic = Topic(name, topic_id, partitions, dict(configs))
        self._add(topic)
        self._save()
        return topic

    def log_config_of(self, topic: Topic) -> Any:
        """The LogConfig a partition of `topic` opens with (internal topics keep their own configs)."""
        overrides = topic.configs
        if topic.internal:
            overrides = {**overrides, **internal_configs(self.config, topic.name)}
        return self.broker.log_config(overrides)

    # -- queries ----------------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return sorted(self._topics.values(), key=lambda t: t.name)

    def log(self, name: str, partition: int) -> Any | None:
        """The partition's log, or None when the topic or partition does not exist. In cluster mode only a
        replica this node holds has a log (the cluster node opens it when it takes the role): a partition
        held elsewhere is None here, and the cluster's replica manager names the error."""
        topic = self._topics.get(name)
        if topic is None or not 0 <= partition < topic.partitions:
            return None
        if self.cluster_mode:
            return self.logs.get(name, partition)
        return self.logs.get_or_create(name, partition)

    def effective_configs(self, topic: Topic) -> dict[str, tuple[str, bool]]:
        """{key: (value, is_default)} for every topic config we know."""
        out = {}
        for key in TOPIC_CONFIG_DEFAULTS:
            if key in topic.configs:
                out[key] = (topic.configs[key], False)
            else:
                out[key] = (broker_default(self.config, key), True)
        return out

    # -- changes ----------------------------------------------------------------------------------
    def check_create(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str | None],
                     assignments: list[tuple[int, list[int]]] | None = None) -> int:
        """Validate a CreateTopics entry; returns the partition count to use, or raises TopicError.

        `assignments` [(partition, broker ids)] replaces the counts, which must then be -1."""
        if assignments:
            partitions = self._check_assignments(partitions, replication_factor, assignments)
            replication_factor = 1
        validate_topic_name(name)
        if name in self._topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions == -1:
            partitions = self.config.get("num.partitions")
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor not in (-1, 1):
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor must be 1 on this single-node broker, got {replication_factor}.")
        self._check_placeable()
        validate_topic_configs(configs)
        return partitions

    def cordoned(self) -> bool:
        """This node's log directory is cordoned (KIP-1066): no new partition may be placed in it."""
        return is_cordoned(self.broker.log_dir, self.config.get(CORDONED_LOG_DIRS),
                           self.broker.features.cordoning_supported())

    def _check_placeable(self) -> None:
        # the placer finds no usable broker when the only one has every log directory cordoned
        if self.cordoned():
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition 1 time(s): the log directory of broker "
                             f"{self.broker.node_id} is cordoned ({CORDONED_LOG_DIRS}).")

    def _check_assignments(self, partitions: int, replication_factor: int,
                           assignments: list[tuple[int, list[int]]]) -> int:
        if partitions != -1 or replication_factor != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignments were set.")
        node = self.broker.node_id
        for index, broker_ids in assignments:
            if list(broker_ids) != [node]:
                raise TopicError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 f"Partition {index} must be assigned to broker {node} only")
        if sorted(index for index, _ids in assignments) != list(range(len(assignments))):
            raise TopicError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                             "Partitions should be a consecutive 0-based integer sequence")
        return len(assignments)

    def preview_configs(self, configs: dict[str, str | None]) -> dict[str, tuple[str, bool]]:
        """effective_configs of a topic that would be created with `configs` (validate_only)."""
        return {key: (configs[key], False) if configs.get(key) is not None else (broker_default(self.config, key), True)
                for key in TOPIC_CONFIG_DEFAULTS}

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic:
        topic = Topic(name, uuid.uuid4(), partitions, {k: v for k, v in (configs or {}).items() if v is not None})
        self._add(topic)
        self._save()  # the id is durable before any partition exists
        self._open_partitions(topic)
        log.info("created topic %s (id %s) with %d partitions", name, topic.topic_id, partitions)
        return topic

    def delete(self, name: str) -> None:
        topic = self._topics.pop(name)
        self._by_id.pop(topic.topic_id, None)
        self._save()
        self.logs.delete_topic(name)
        self.broker.producers.forget_topic(name)
        self.broker.txn_index.forget_topic(name)
        log.info("deleted topic %s (id %s)", name, topic.topic_id)

    def check_add_partitions(self, name: str, count: int, assignments: list[list[int]] | None) -> Topic:
        """Validate a CreatePartitions entry (ReplicationControlManager.createPartitions' checks);
        returns the topic, or raises TopicError."""
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        if count < topic.partitions:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"The topic {name} currently has {topic.partitions} "
                                                           f"partition(s); {count} would not be an increase.")
        if count == topic.partitions:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {count} partition(s).")
        if count > MAX_PARTITIONS:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Cannot have more than {MAX_PARTITIONS} partitions.")
        self._check_placeable()
        added = count - topic.partitions
        if assignments is not None:
            if len(assignments) != added:
                raise TopicError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                 f"Attempted to add {added} additional partition(s), but only "
                                 f"{len(assignments)} assignment(s) were specified.")
            for broker_ids in assignments:
                if len(broker_ids) != 1:
                    raise TopicError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                     f"The manual partition assignment includes a partition with {len(broker_ids)} "
                                     "replica(s), but this is not consistent with previous partitions, which have "
                                     "1 replica(s).")
                if broker_ids[0] != self.broker.node_id:
                    raise TopicError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                                     f"The manual partition assignment includes broker {broker_ids[0]}, but no such "
                                     "broker is registered.")
        return topic

    def add_partitions(self, name: str, count: int) -> Topic:
        """Grow `name` to `count` partitions: the metadata is durable before the new logs exist (a crash
        in between leaves partitions that _load opens again)."""
        topic = self._topics[name]
        before, topic.partitions = topic.partitions, count
        self._save()
        self._open_partitions(topic)
        log.info("topic %s: %d -> %d partitions", name, before, count)
        return topic

    def set_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """Replace the topic's overrides (validated by the caller with validate_topic_configs), durably;
        its logs take the new LogConfig at once (retention and compaction on their next pass)."""
        topic = self._topics[name]
        topic.configs = dict(configs)
        self._save()
        self._open_partitions(topic)
        log.info("topic %s configs now %s", name, topic.configs)
        return topic

    def refresh_log_configs(self) -> None:
        """After a broker-level default changed (dynamic broker configs): every open log gets its LogConfig
        again. None is opened here: a cluster node has the topics it mirrors but only its replicas' logs."""
        for topic in self._topics.values():
            cfg = self.log_config_of(topic)
            for p in range(topic.partitions):
                plog = self.logs.get(topic.name, p)
                if plog is not None:
                    plog.config = cfg

    def maybe_auto_create(self, name: str) -> Topic | None:
        """Kafka's auto.create.topics.enable: create an unknown, valid, non-internal name."""
        if not self.config.get("auto.create.topics.enable") or name in (CONSUMER_OFFSETS, TRANSACTION_STATE):
            return None
        try:
            validate_topic_name(name)
        except TopicError:
            return None
        if self.cordoned():  # the creation fails as CreateTopics would: the name stays unknown
            return None
        return self.create(name, self.config.get("num.partitions"))

    def ensure_consumer_offsets(self) -> Topic:
        topic = self._topics.get(CONSUMER_OFFSETS)
        if topic is None:
            topic = self.create(CONSUMER_OFFSETS, self.config.get("offsets.topic.num.partitions"),
                                consumer_offsets_configs(self.config))
        return topic

    def ensure_transaction_state(self) -> Topic:
        topic = self._topics.get(TRANSACTION_STATE)
        if topic is None:
            topic = self.create(TRANSACTION_STATE, self.config.get("transaction.state.log.num.partitions"),
                                transaction_state_configs(self.config))
        return topic
