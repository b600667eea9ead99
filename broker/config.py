"""Broker configuration under Kafka's own property names, with Kafka's defaults.

Sources, later wins: the embedded defaults, a `server.properties` file, `--override key=value`.
Values are typed once here, so the rest of the broker reads `cfg.get("group.max.size")` as an int.
Unknown or malformed properties are a ConfigError naming the key. Kafka settings that make no sense for a
single-node broker (threads, replication, KRaft quorum) are accepted and ignored so that a real Kafka
`server.properties` still loads.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from kcoord.cluster.etcd_connect import parse_etcd_connect
from kcoord.metadata import cordoned_log_dirs

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A property that is unknown or does not parse; the message names the key."""


@dataclasses.dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _int(lo: int = -(2**63), hi: int = INT64_MAX) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value} is outside [{lo}, {hi}]")
        return value

    return parse


def _bool(raw: str) -> bool:
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"expected true or false, got {raw!r}")


def _str(raw: str) -> str:
    return str(raw).strip()


def _optional_str(raw: str | None) -> str | None:
    if raw is None:
        return None
    text = str(raw).strip()
    return text or None


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        text = str(raw).strip()
        for choice in choices:
            if text.lower() == choice.lower():
                return choice
        raise ValueError(f"expected one of {', '.join(choices)}, got {raw!r}")

    return parse


def admin_address(url: str) -> tuple[str, int]:
    """`http://HOST:PORT` -> (host, port), or ValueError."""
    scheme, sep, rest = url.partition("://")
    host, _, port_text = rest.rpartition(":")
    if not sep or scheme.lower() != "http" or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"expected http://HOST:PORT (port 0 = any free port), got {url!r}")
    return host.strip("[]"), int(port_text)


def _admin_listener(raw: str | None) -> str | None:
    """kcoord.admin.listener: checked here, split where it is bound (admin_address); empty = off."""
    text = _optional_str(raw)
    if text is not None:
        admin_address(text)
    return text


def _str_list(raw: str) -> list[str]:
    return [part.strip() for part in str(raw).split(",") if part.strip()]


# Kafka's assignor class names, and the short names it also accepts (kcoord.coordinator.consumer.assignors)
_ASSIGNOR_CLASSES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                     "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


def _assignors(raw: str) -> list[str]:
    names = [_ASSIGNOR_CLASSES.get(item, item) for item in _str_list(raw)]
    unknown = [n for n in names if n not in ("uniform", "range")]
    if unknown or not names:
        raise ValueError(f"expected a list of uniform, range, got {raw!r}")
    return names


_HOST_CHARACTERS = re.compile(r"[0-9a-zA-Z\-%._:]*")  # Kafka's Utils.validHostPattern


def _ip_overrides(raw: str) -> dict[str, int]:
    """`host:count,...` (Csv.parseCsvMap: the count after the last colon, so an IPv6 host keeps its own)."""
    out: dict[str, int] = {}
    for item in _str_list(raw):
        host, sep, count = item.rpartition(":")
        host = host.strip()
        if not sep or not host or not _HOST_CHARACTERS.fullmatch(host):
            raise ValueError(f"expected host:count entries, got {item!r}")
        out[host] = _int(0, INT32_MAX)(count)
    return out


def parse_listeners(raw: str) -> list[Listener]:
    """`PLAINTEXT://127.0.0.1:9092,OTHER://:9093` -> Listeners. Empty host means all interfaces."""
    listeners = []
    for item in _str_list(raw):
        name, sep, rest = item.partition("://")
        if not sep or not name:
            raise ValueError(f"listener {item!r} is not NAME://HOST:PORT")
        if rest.startswith("["):
            host, _, port_text = rest[1:].partition("]:")
        else:
            host, _, port_text = rest.rpartition(":")
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"listener {item!r} has no numeric port") from None
        if not 0 <= port <= 65535:
            raise ValueError(f"listener {item!r} port is outside 0-65535")
        listeners.append(Listener(name.upper(), host or "0.0.0.0", port))
    if not listeners:
        raise ValueError("at least one listener is required")
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ValueError("listener names must be unique")
    return listeners


@dataclasses.dataclass(frozen=True)
class Property:
    name: str
    default: Any
    parse: Callable[[Any], Any]
    doc: str


def _p(name: str, default: Any, parse: Callable[[Any], Any], doc: str) -> Property:
    return Property(name, default, parse, doc)


# The properties kcoord honours, with Kafka's defaults (kcoord-specific ones say so).
PROPERTIES: dict[str, Property] = {p.name: p for p in [
    # --- server
    _p("listeners", "PLAINTEXT://127.0.0.1:9092", parse_listeners,
       "Where to accept connections. kcoord's embedded default binds loopback; port 0 picks a free port."),
    _p("advertised.listeners", None, lambda raw: None if raw is None else parse_listeners(raw),
       "What Metadata/FindCoordinator tell clients; defaults to the bound listeners."),
    _p("node.id", 1, _int(0, INT32_MAX), "This broker's id (Kafka's KRaft name; broker.id is an alias)."),
    _p("log.dirs", "./data", _str_list, "Where partition directories live (first entry is used)."),
    _p("cordoned.log.dirs", "", _str_list,
       "Log directories (or * for all) where no new partition is placed (KIP-1066); effective from "
       "metadata.version 4.3-IV0, also dynamic (IncrementalAlterConfigs on this broker)."),
    _p("num.partitions", 1, _int(1, 100_000), "Partitions of an auto-created topic."),
    _p("default.replication.factor", 1, _int(1, 32767),
       "Replication factor of auto-created topics and of CreateTopics with -1 (cluster mode); a single "
       "node always uses 1."),
    _p("min.insync.replicas", 1, _int(1, INT32_MAX),
       "Replicas that must acknowledge an acks=all write (topic default; cluster mode)."),
    _p("unclean.leader.election.enable", False, _bool,
       "Cluster mode: let an out-of-sync replica lead when the whole ISR is gone (data loss)."),
    # replication (cluster mode; kcoord.cluster.replica_manager.ReplicationConfig reads them), Kafka's defaults
    _p("replica.lag.time.max.ms", 30_000, _int(1, INT32_MAX),
       "A follower not caught up for this long leaves the ISR (cluster mode)."),
    _p("replica.fetch.wait.max.ms", 500, _int(0, INT32_MAX), "A follower's Fetch long-poll (cluster mode)."),
    _p("replica.fetch.min.bytes", 1, _int(1, INT32_MAX), "Bytes a follower's Fetch waits for (cluster mode)."),
    _p("replica.fetch.max.bytes", 1_048_576, _int(0, INT32_MAX),
       "Bytes per partition in a follower's Fetch (cluster mode)."),
    _p("replica.fetch.response.max.bytes", 10_485_760, _int(0, INT32_MAX),
       "Bytes per follower Fetch response (cluster mode)."),
    _p("replica.fetch.backoff.ms", 1_000, _int(0, INT32_MAX),
       "A follower's wait after a failed fetch (cluster mode)."),
    _p("broker.rack", None, _optional_str, "This broker's rack (rack-aware replica placement; Metadata)."),
    _p("auto.create.topics.enable", True, _bool, "Create a topic on Metadata/Produce for an unknown name."),
    _p("delete.topic.enable", True, _bool, "Allow DeleteTopics."),
    _p("message.max.bytes", 1048588, _int(0, INT32_MAX), "Largest record batch accepted by Produce."),
    _p("socket.request.max.bytes", 104857600, _int(1, INT32_MAX), "Largest request frame accepted."),
    _p("connections.max.idle.ms", 600000, _int(-1), "Idle connections are closed after this."),
    # --- connection quotas (kcoord.broker.connection_quotas; SocketServerConfigs, dynamic as in Kafka)
    _p("max.connections", INT32_MAX, _int(0, INT32_MAX),
       "Connections the broker holds at once; past it the acceptor waits for one to close "
       "(listener.name.<listener>.max.connections: per listener)."),
    _p("max.connection.creation.rate", INT32_MAX, _int(0, INT32_MAX),
       "New connections a second the broker accepts; past it the acceptor waits "
       "(listener.name.<listener>.max.connection.creation.rate: per listener)."),
    _p("max.connections.per.ip", INT32_MAX, _int(0, INT32_MAX),
       "Connections from one ip address; a new one past it is closed at once. 0 only with overrides."),
    _p("max.connections.per.ip.overrides", "", _ip_overrides,
       "Per ip or host name limits replacing max.connections.per.ip, as host:count,... "
       "(hostName:100,127.0.0.1:200)."),
    # --- security (broker/security/ reads them; listener.name.<listener>.<key> overrides per listener)
    _p("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
       _str, "Listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    _p("ssl.keystore.type", "JKS", _str, "kcoord reads PEM only (the server's certificate chain and key)."),
    _p("ssl.keystore.location", None, _optional_str, "PEM file with the private key and certificate chain."),
    _p("ssl.keystore.password", None, _optional_str, "Accepted; a PEM keystore has no store password."),
    _p("ssl.key.password", None, _optional_str, "Password of an encrypted PEM private key."),
    _p("ssl.keystore.certificate.chain", None, _optional_str, "The certificate chain itself, PEM text."),
    _p("ssl.keystore.key", None, _optional_str, "The private key itself, PEM text."),
    _p("ssl.truststore.type", "JKS", _str, "kcoord reads PEM only (CA certificates clients are checked against)."),
    _p("ssl.truststore.location", None, _optional_str, "PEM file of trusted CA certificates."),
    _p("ssl.truststore.password", None, _optional_str, "Accepted; a PEM truststore has no password."),
    _p("ssl.truststore.certificates", None, _optional_str, "Trusted CA certificates themselves, PEM text."),
    _p("ssl.client.auth", "none", _one_of("none", "requested", "required"), "Ask TLS clients for a certificate."),
    _p("ssl.principal.mapping.rules", "DEFAULT", _str, "kcoord: DEFAULT only (User:<the subject's RFC 2253 name>)."),
    _p("ssl.enabled.protocols", "TLSv1.2,TLSv1.3", _str_list, "TLS versions accepted."),
    _p("sasl.enabled.mechanisms", "GSSAPI", _str_list, "kcoord serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512."),
    _p("sasl.jaas.config", None, _optional_str,
       "JAAS login module config; PLAIN users as user_<name>=\"<password>\" (prefer listener.name.*)."),
    _p("connections.max.reauth.ms", 0, _int(0), "SASL session lifetime; clients re-authenticate (KIP-368)."),
    _p("authorizer.class.name", "", _str,
       "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on; empty = no authorization."),
    _p("super.users", "", lambda raw: [u.strip() for u in str(raw).split(";") if u.strip()],
       "Principals allowed everything, ';'-separated (User:alice;User:CN=admin)."),
    _p("allow.everyone.if.no.acl.found", False, _bool, "Allow when no ACL matches the resource at all."),
    _p("queued.max.requests", 500, _int(1, INT32_MAX),
       "Requests read ahead per connection before reading pauses (kcoord: per connection)."),
    # --- log
    _p("log.segment.bytes", 1073741824, _int(14, INT32_MAX), "Segment size before rolling."),
    _p("log.roll.ms", None, lambda raw: None if raw is None else _int(1)(raw), "Segment age before rolling."),
    _p("log.roll.hours", 168, _int(1, INT32_MAX), "Segment age before rolling, if log.roll.ms is unset."),
    _p("log.retention.ms", None, lambda raw: None if raw is None else _int(-1)(raw), "Retention by time."),
    _p("log.retention.minutes", None, lambda raw: None if raw is None else _int(-1)(raw), "Retention by time."),
    _p("log.retention.hours", 168, _int(-1, INT32_MAX), "Retention by time (lowest precedence)."),
    _p("log.retention.bytes", -1, _int(-1), "Retention by size per partition; -1 = unlimited."),
    _p("log.retention.check.interval.ms", 300000, _int(1), "How often retention runs."),
    _p("log.cleanup.policy", "delete", _one_of("delete", "compact"), "Default cleanup policy of topics."),
    _p("log.cleaner.enable", True, _bool, "Run compaction for compacted topics."),
    _p("log.cleaner.delete.retention.ms", 86400000, _int(0), "How long tombstones survive compaction."),
    _p("log.cleaner.min.cleanable.ratio", 0.5, float, "Dirty ratio that triggers compaction."),
    _p("log.cleaner.backoff.ms", 15000, _int(0), "Sleep between cleaner passes."),
    _p("log.index.interval.bytes", 4096, _int(0, INT32_MAX), "Bytes between offset-index entries."),
    _p("log.message.timestamp.type", "CreateTime", _one_of("CreateTime", "LogAppendTime"),
       "Timestamp kept in appended batches."),
    _p("log.flush.interval.messages", 1, _int(1),
       "kcoord default 1: an append is acknowledged only after fsync (group commit). Larger = rely on the OS."),
    # --- group coordinator
    _p("group.min.session.timeout.ms", 6000, _int(0, INT32_MAX), "Smallest session timeout a member may ask for."),
    _p("group.max.session.timeout.ms", 1800000, _int(0, INT32_MAX), "Largest session timeout a member may ask for."),
    _p("group.initial.rebalance.delay.ms", 3000, _int(0, INT32_MAX),
       "How long a new group waits for more members before its first rebalance (KIP-134)."),
    _p("group.max.size", INT32_MAX, _int(1, INT32_MAX), "Members per group (KIP-389)."),
    _p("group.consumer.session.timeout.ms", 45000, _int(1, INT32_MAX),
       "Consumer groups (KIP-848): a member without a heartbeat for this long is removed."),
    _p("group.consumer.min.session.timeout.ms", 45000, _int(1, INT32_MAX),
       "Consumer groups: lower bound of group.consumer.session.timeout.ms."),
    _p("group.consumer.max.session.timeout.ms", 60000, _int(1, INT32_MAX),
       "Consumer groups: upper bound of group.consumer.session.timeout.ms."),
    _p("group.consumer.heartbeat.interval.ms", 5000, _int(1, INT32_MAX),
       "Consumer groups (KIP-848): how often members heartbeat."),
    _p("group.consumer.min.heartbeat.interval.ms", 5000, _int(1, INT32_MAX),
       "Consumer groups: lower bound of group.consumer.heartbeat.interval.ms."),
    _p("group.consumer.max.heartbeat.interval.ms", 15000, _int(1, INT32_MAX),
       "Consumer groups: upper bound of group.consumer.heartbeat.interval.ms."),
    _p("group.consumer.max.size", INT32_MAX, _int(1, INT32_MAX), "Consumer groups (KIP-848): members per group."),
    _p("group.consumer.assignors", "uniform,range", _assignors,
       "Consumer groups: server-side assignors a member may ask for; the first is the default."),
    _p("group.consumer.migration.policy", "bidirectional", _one_of("disabled", "upgrade", "downgrade", "bidirectional"),
       "Online conversion of non-empty groups between the classic and the consumer protocol (KIP-848)."),
    _p("group.consumer.regex.refresh.interval.ms", 600_000, _int(10_000, INT32_MAX),
       "Consumer groups: how old a regex subscription's resolution may get before it is resolved again."),
    _p("group.share.session.timeout.ms", 45000, _int(1, INT32_MAX),
       "Share groups (KIP-932): a member without a heartbeat for this long is removed."),
    _p("group.share.min.session.timeout.ms", 45000, _int(1, INT32_MAX),
       "Share groups: lower bound of group.share.session.timeout.ms."),
    _p("group.share.max.session.timeout.ms", 60000, _int(1, INT32_MAX),
       "Share groups: upper bound of group.share.session.timeout.ms."),
    _p("group.share.heartbeat.interval.ms", 5000, _int(1, INT32_MAX),
       "Share groups (KIP-932): how often members heartbeat."),
    _p("group.share.min.heartbeat.interval.ms", 5000, _int(1, INT32_MAX),
       "Share groups: lower bound of group.share.heartbeat.interval.ms."),
    _p("group.share.max.heartbeat.interval.ms", 15000, _int(1, INT32_MAX),
       "Share groups: upper bound of group.share.heartbeat.interval.ms."),
    _p("group.share.max.size", 200, _int(1, 1000), "Share groups (KIP-932): members per group."),
    # the share-partitions' data plane (KIP-932: ShareFetch / ShareAcknowledge, kcoord.broker.share)
    _p("group.share.record.lock.duration.ms", 30000, _int(1000, 3_600_000),
       "Share groups: how long a delivered record stays acquired by its consumer."),
    _p("group.share.min.record.lock.duration.ms", 15000, _int(1000, 3_600_000),
       "Share groups: lower bound of group.share.record.lock.duration.ms."),
    _p("group.share.max.record.lock.duration.ms", 60000, _int(1000, 3_600_000),
       "Share groups: upper bound of group.share.record.lock.duration.ms."),
    _p("group.share.delivery.count.limit", 5, _int(2, 10),
       "Share groups: deliveries after which a record is archived instead of made available again."),
    _p("group.share.partition.max.record.locks", 2000, _int(100, 10_000),
       "Share groups: the most records in flight (acquired or waiting) per share-partition."),
    _p("group.share.max.share.sessions", 2000, _int(1, INT32_MAX),
       "Share sessions this node keeps (one per share consumer); past it SHARE_SESSION_LIMIT_REACHED."),
    _p("share.coordinator.state.topic.num.partitions", 50, _int(1, 10_000), "Partitions of __share_group_state."),
    _p("share.coordinator.state.topic.replication.factor", 3, _int(1, 32767),
       "Replication factor of __share_group_state (cluster mode; a single node uses 1)."),
    _p("share.coordinator.state.topic.min.isr", 2, _int(1, INT32_MAX),
       "min.insync.replicas of __share_group_state (cluster mode)."),
    _p("offsets.topic.num.partitions", 50, _int(1, 10_000), "Partitions of __consumer_offsets."),
    _p("offsets.topic.replication.factor", 3, _int(1, 32767),
       "Replication factor of __consumer_offsets (cluster mode: not created until that many brokers "
       "are registered); a single node uses 1."),
    _p("offsets.topic.segment.bytes", 104857600, _int(14, INT32_MAX), "Segment size of __consumer_offsets."),
    _p("offsets.topic.compression.codec", 0, _int(0, 4), "Compression of coordinator writes (0 = none)."),
    _p("offsets.retention.minutes", 10080, _int(1, INT32_MAX), "Offset retention (KIP-211)."),
    _p("offsets.retention.check.interval.ms", 600000, _int(1), "How often expired offsets are removed."),
    _p("offsets.commit.timeout.ms", 5000, _int(1, INT32_MAX), "Longest wait for a durable commit."),
    _p("offsets.load.buffer.size", 5242880, _int(1, INT32_MAX), "Read size while loading __consumer_offsets."),
    _p("offset.metadata.max.bytes", 4096, _int(0, INT32_MAX), "Largest commit metadata string."),
    # --- transaction coordinator
    _p("transaction.state.log.num.partitions", 50, _int(1, 10_000), "Partitions of __transaction_state."),
    _p("transaction.state.log.replication.factor", 3, _int(1, 32767),
       "Replication factor of __transaction_state (cluster mode; a single node uses 1)."),
    _p("transaction.state.log.min.isr", 2, _int(1, INT32_MAX),
       "min.insync.replicas of __transaction_state (cluster mode)."),
    _p("transaction.state.log.segment.bytes", 104857600, _int(14, INT32_MAX), "Segment size of __transaction_state."),
    _p("transaction.max.timeout.ms", 900000, _int(1, INT32_MAX), "Largest transaction timeout a producer may ask for."),
    _p("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, _int(1, INT32_MAX),
       "How often transactions open past their timeout are aborted."),
    _p("transactional.id.expiration.ms", 604800000, _int(1, INT32_MAX),
       "A transactional id idle (no transaction) this long is removed from __transaction_state."),
    _p("transaction.remove.expired.transaction.cleanup.interval.ms", 3600000, _int(1, INT32_MAX),
       "How often expired transactional ids are removed."),
    # --- metrics (kcoord-specific)
    _p("metrics.port", -1, _int(-1, 65535),
       "kcoord: Prometheus text endpoint (GET /metrics) port on metrics.host; -1 = off, 0 = any free port."),
    _p("metrics.host", "127.0.0.1", _str, "kcoord: address of the Prometheus endpoint."),
    _p("metrics.statsd.address", None, _optional_str, "kcoord: HOST:PORT to push StatsD metrics to over UDP."),
    _p("metrics.statsd.interval.ms", 10000, _int(100), "kcoord: StatsD push interval."),
    _p("metrics.statsd.prefix", "kcoord", _str, "kcoord: StatsD metric name prefix."),
    # --- cluster (kcoord-specific; issue #26)
    _p("kcoord.etcd.connect", "", parse_etcd_connect,
       "kcoord: HOST:PORT[,HOST:PORT...][/PREFIX] of the etcd cluster holding this cluster's metadata under "
       "PREFIX (default /kcoord), as zookeeper.connect; empty = no etcd, the node is a cluster of one."),
    _p("kcoord.etcd.session.timeout.ms", 9000, _int(1000, INT32_MAX),
       "kcoord: lease TTL of this node's registration (KRaft's broker.session.timeout.ms); whole seconds, "
       "etcd grants at least about 2 s."),
    # --- client quotas (KIP-13 / KIP-219; the quotas themselves: AlterClientQuotas)
    _p("quota.window.num", 11, _int(1, INT32_MAX), "The number of samples kept for client quotas' rates."),
    _p("quota.window.size.seconds", 1, _int(1, INT32_MAX), "The time span of each sample of client quotas' rates."),
    _p("controller.quota.window.num", 11, _int(1, INT32_MAX),
       "controller_mutation_rate (KIP-599): the burst a client may mutate at once is this many windows' worth."),
    _p("controller.quota.window.size.seconds", 1, _int(1, INT32_MAX),
       "controller_mutation_rate (KIP-599): the time span of each of those windows."),
    # --- client telemetry (KIP-714)
    _p("telemetry.max.bytes", 1048576, _int(1, INT32_MAX),
       "The largest PushTelemetry payload (compressed) a client may send."),
    _p("kcoord.client.telemetry.enable", False, _bool,
       "kcoord: the built-in client telemetry receiver (KIP-714; Kafka: a ClientTelemetry metric reporter): "
       "GetTelemetrySubscriptions / PushTelemetry advertised, pushed metrics shown at /metrics, `kcoord "
       "clients` and the test fixture. Defining a CLIENT_METRICS resource also turns it on."),
    _p("kcoord.client.telemetry.export.max.bytes", 64 << 20, _int(0, INT64_MAX),
       "kcoord: the cap on the pushed metrics kept as JSON lines under log.dirs/kcoord-client-telemetry/ for "
       "the analytics report (rolled over 4 files, the oldest deleted, no fsync); 0 = no export."),
    _p("kcoord.client.telemetry.push.interval.ms", 30000, _int(100, 3600000),
       "kcoord: push interval of kcoord's own subscription (every metric), given to clients while the "
       "receiver is on and no CLIENT_METRICS resource is defined."),
    _p("kcoord.admin.listener", None, _admin_listener,
       "kcoord: http://HOST:PORT of the admin endpoint (fault injection, timers); unset = off. For tests only: "
       "it has no authentication."),
]}

ALIASES = {"broker.id": "node.id", "log.dir": "log.dirs"}
LISTENER_PREFIX = "listener.name."

# Kafka settings with no meaning on a single-node, plaintext broker: accepted, ignored.
IGNORED = frozenset({
    "process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "controller.listener.names", "inter.broker.listener.name", "sasl.mechanism.inter.broker.protocol",
    "sasl.mechanism.controller.protocol", "ssl.endpoint.identification.algorithm",
    "num.network.threads", "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "zookeeper.connect", "zookeeper.connection.timeout.ms", "group.coordinator.rebalance.protocols",
    "log.flush.interval.ms", "log.flush.scheduler.interval.ms",
})


def read_properties_file(path: str | pathlib.Path) -> dict[str, str]:
    """Java .properties subset: `key=value` or `key: value`, `#`/`!` comments, trailing-backslash continuation."""
    props: dict[str, str] = {}
    text = pathlib.Path(path).read_text(encoding="utf-8")
    pending = ""
    for lineno, raw_line in enumerate(text.splitlines(), 1):
        line = raw_line.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        key, sep, value = _split_property(line)
        if not sep:
            raise ConfigError(f"{path}:{lineno}: {line!r} is not key=value")
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str, str]:
    for i, ch in enumerate(line):
        if ch in "=:":
            return line[:i].strip(), ch, line[i + 1:].strip()
    return line, "", ""


def parse_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override {item!r} is not key=value")
        overrides[key.strip()] = value.strip()
    return overrides


class BrokerConfig:
    """Typed, validated broker properties. `get(name)` returns the typed value of a Kafka property."""

    def __init__(self, raw: Mapping[str, Any] | None = None) -> None:
        self.ignored: list[str] = []
        self.per_listener: dict[str, str] = {}  # listener.name.<listener>.<key> (broker/security/ reads them)
        given: dict[str, Any] = {}
        for key, value in (raw or {}).items():
            name = ALIASES.get(key, key)
            if name.startswith(LISTENER_PREFIX):
                self.per_listener[name] = str(value).strip()
                continue
            if name in IGNORED:
                self.ignored.append(key)
                continue
            if name not in PROPERTIES:
                raise ConfigError(f"unknown property {key!r}")
            given[name] = value
        self.given = frozenset(given)  # set by a file or an override (Kafka's STATIC_BROKER_CONFIG)
        self.props: dict[str, Any] = {}
        for name, prop in PROPERTIES.items():
            if name not in given:
                default = prop.default  # string defaults are written the way a user would write them
                self.props[name] = prop.parse(default) if isinstance(default, str) else default
                continue
            try:
                self.props[name] = prop.parse(given[name])
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"property {name!r}: {exc}") from None
        if self.props["group.min.session.timeout.ms"] > self.props["group.max.session.timeout.ms"]:
            raise ConfigError("property 'group.min.session.timeout.ms' exceeds group.max.session.timeout.ms")
        from kcoord.broker.security.listener_config import check_listeners

        check_listeners(self)
        self._check_bounds("group.consumer.session.timeout.ms")
        self._check_bounds("group.consumer.heartbeat.interval.ms")
        self._check_bounds("group.share.session.timeout.ms", "group.share.")
        self._check_bounds("group.share.heartbeat.interval.ms", "group.share.")
        self._check_bounds("group.share.record.lock.duration.ms", "group.share.")
        if self.props["group.consumer.heartbeat.interval.ms"] >= self.props["group.consumer.session.timeout.ms"]:
            raise ConfigError("property 'group.consumer.heartbeat.interval.ms' must be less than "
                              "group.consumer.session.timeout.ms")
        if self.props["max.connections.per.ip"] == 0 and not self.props["max.connections.per.ip.overrides"]:
            raise ConfigError("property 'max.connections.per.ip' can be 0 only if max.connections.per.ip.overrides "
                              "is set")
        cordon_refusal = cordoned_log_dirs.refusal(self.props["cordoned.log.dirs"], self.props["log.dirs"])
        if cordon_refusal is not None:  # Kafka refuses to start (KafkaConfig's validation)
            raise ConfigError(f"property {cordon_refusal}")


    def _check_bounds(self, name: str, prefix: str = "group.consumer.") -> None:
        """Kafka's GroupCoordinatorConfig: a consumer (or share) group timeout within its min and max properties."""
        low_name, high_name = (name.replace(prefix, f"{prefix}{b}.") for b in ("min", "max"))
        value, low, high = self.props[name], self.props[low_name], self.props[high_name]
        if not low <= value <= high:
            raise ConfigError(f"property {name!r}: {value} is outside [{low_name}={low}, {high_name}={high}]")

    @classmethod
    def load(cls, path: str | pathlib.Path | None = None,
             overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        raw: dict[str, Any] = {}
        if path is not None:
            try:
                raw.update(read_properties_file(path))
            except OSError as exc:
                raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
        raw.update(overrides or {})
        return cls(raw)

    def get(self, name: str) -> Any:
        try:
            return self.props[ALIASES.get(name, name)]
        except KeyError:
            raise ConfigError(f"unknown property {name!r}") from None

    # Derived values the broker reads often.
    @property
    def listeners(self) -> list[Listener]:
        return self.props["listeners"]

    @property
    def advertised_listeners(self) -> list[Listener]:
        return self.props["advertised.listeners"] or self.listeners

    @property
    def log_dirs(self) -> list[str]:
        return self.props["log.dirs"]

    @property
    def node_id(self) -> int:
        return self.props["node.id"]

    @property
    def log_roll_ms(self) -> int:
        return self.props["log.roll.ms"] or self.props["log.roll.hours"] * 3_600_000

    @property
    def log_retention_ms(self) -> int:
        if self.props["log.retention.ms"] is not None:
            return self.props["log.retention.ms"]
        if self.props["log.retention.minutes"] is not None:
            return self.props["log.retention.minutes"] * 60_000
        hours = self.props["log.retention.hours"]
        return -1 if hours < 0 else hours * 3_600_000

    def is_default(self, name: str) -> bool:
        """True unless a file or an override set the property (whatever the value)."""
        return ALIASES.get(name, name) not in self.given

    def describe(self) -> list[tuple[str, Any, str]]:
        """(name, effective value, doc) for every property, for `kcoord config` and DescribeConfigs."""
        return [(name, self.props[name], prop.doc) for name, prop in PROPERTIES.items()]

    def __repr__(self) -> str:
        return f"BrokerConfig(listeners={self.listeners}, log_dirs={self.log_dirs}, node_id={self.node_id})"
