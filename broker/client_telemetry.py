"""Client telemetry (KIP-714): client instances, their subscriptions, and the metrics they push.

Kafka splits this between ClientMetricsManager (instances, subscription ids, the push-interval checks) and
a ClientTelemetry receiver plugin (metric.reporters) that gets the payloads; the broker advertises
GetTelemetrySubscriptions / PushTelemetry only when such a receiver is configured
(ApiVersionManager: clientTelemetryEnabled). kcoord's receiver is built in: it decodes each push (its
compression, then OTLP MetricsData: kcoord.protocol.otlp) and keeps the latest value of every data
point per client instance, bounded, for /metrics, the admin endpoint (`kcoord clients`) and the pytest
fixture. It is on when `kcoord.client.telemetry.enable=true` or once a CLIENT_METRICS resource exists.

Subscriptions are the CLIENT_METRICS resources (metadata/client_metrics_configs.py). With the receiver on
by the property and no resource defined, every client gets kcoord's own subscription: all metrics (`*`)
every `kcoord.client.telemetry.push.interval.ms` -- Kafka would request none, and a development broker
turned on to show a client's metrics should show them without a further step.

Pure logic: time comes from the injected `clock_ms`, nothing here does I/O. Rules as Kafka's
ClientMetricsManager (processGetTelemetrySubscriptionRequest, processPushTelemetryRequest, validateGetRequest,
validatePushRequest, createClientInstance) and ClientMetricsInstance (maybeUpdateGetRequestTimestamp,
maybeUpdatePushRequestTimestamp). Deliberate differences: DeltaTemporality is false (the receiver shows
cumulative values, what Prometheus expects; the field is the broker's choice), and an instance is dropped
when it expires (3 push intervals, at least 60 s, without a request) rather than also on disconnect.
"""
from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from kcoord.metadata.client_metrics_configs import ALL_METRICS, DEFAULT_INTERVAL_MS, Subscription
from kcoord.observability.metrics import prometheus_family, prometheus_name
from kcoord.protocol.errors import DecodeError, ErrorCode
from kcoord.protocol.otlp import DataPoint, MetricsData, OtlpError, decode_metrics_data
from kcoord.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, crc32c, decompress

log = logging.getLogger("kcoord.telemetry")

# What a client may compress its pushes with, in Kafka's order of preference (SUPPORTED_COMPRESSION_TYPES)
ACCEPTED_COMPRESSION = (ZSTD, LZ4, GZIP, SNAPPY)
KNOWN_COMPRESSION = frozenset((NONE, *ACCEPTED_COMPRESSION))
MAX_INSTANCES = 4096            # Kafka's cache holds 16,384; a development broker sees far fewer clients
MAX_POINTS_PER_INSTANCE = 4096  # distinct (metric, attributes) kept per instance; more are dropped
MIN_EXPIRY_MS = 60_000          # Kafka's DEFAULT_CACHE_EXPIRY_MS
ZERO = uuid.UUID(int=0)
RESERVED_IDS = frozenset((ZERO, uuid.UUID(int=1)))   # Uuid.RESERVED: ZERO_UUID and ONE_UUID
_NEVER = -(1 << 62)


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """What a subscription's `match` selects on (ClientMetricsInstanceMetadata)."""
    client_id: str
    software_name: str
    software_version: str
    source_address: str
    source_port: int

    def selectors(self, instance_id: uuid.UUID) -> dict[str, str]:
        return {"client_instance_id": str(instance_id), "client_id": self.client_id,
                "client_software_name": self.software_name, "client_software_version": self.software_version,
                "client_source_address": self.source_address, "client_source_port": str(self.source_port)}


@dataclass(frozen=True, slots=True)
class SubscriptionAnswer:
    """The body of a GetTelemetrySubscriptions answer (error NONE) or just its error."""
    error: ErrorCode
    client_instance_id: uuid.UUID = ZERO
    subscription_id: int = 0
    push_interval_ms: int = 0
    requested_metrics: tuple[str, ...] = ()


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    client: ClientInfo
    subscription_id: int
    subscription_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    last_get_ms: int = _NEVER
    last_push_ms: int = _NEVER
    last_request_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE
    pushes: int = 0
    points: dict[tuple[str, tuple[tuple[str, str], ...]], DataPoint] = field(default_factory=dict)
    resource: dict[str, str] = field(default_factory=dict)

    def may_get(self, now: int) -> bool:
        """A GetTelemetrySubscriptions is due: a push interval since the last get or push."""
        if now - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now
            return True
        return False

    def may_push(self, now: int) -> bool:
        """A push is due: the first after a get, or a push interval after the previous push."""
        if self.last_get_ms > self.last_push_ms or now - self.last_push_ms >= self.push_interval_ms:
            self.last_push_ms = now
            return True
        return False

    @property
    def expiry_ms(self) -> int:
        return max(MIN_EXPIRY_MS, 3 * self.push_interval_ms)

    def to_json(self) -> dict:
        return {"client_instance_id": str(self.instance_id), "client_id": self.client.client_id,
                "client_software_name": self.client.software_name,
                "client_software_version": self.client.software_version,
                "client_source_address": self.client.source_address, "subscription_id": self.subscription_id,
                "push_interval_ms": self.push_interval_ms, "requested_metrics": list(self.metrics),
                "pushes": self.pushes, "terminating": self.terminating, "last_error": self.last_error.name,
                "metrics": [point_json(p) for p in self.points.values()]}


def point_json(p: DataPoint) -> dict:
    out = {"name": p.metric, "kind": p.kind, "value": p.value, "attributes": dict(p.attributes)}
    if p.count is not None:
        out["count"] = p.count
    if p.unit:
        out["unit"] = p.unit
    return out


def subscription_id(metrics: tuple[str, ...], push_interval_ms: int, instance_id: uuid.UUID) -> int:
    """A signed int32 naming the subscription set, per instance: a CRC-32C of the metrics and interval
    XORed with the instance id's hash (as computeSubscriptionId; Java's Uuid.hashCode folded in)."""
    crc = crc32c((",".join(sorted(metrics)) + str(push_interval_ms)).encode())
    bits = instance_id.int
    hilo = (bits >> 64) ^ (bits & ((1 << 64) - 1))
    value = (crc ^ (hilo >> 32) ^ hilo) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class ClientTelemetry:
    """The one owner of client instances and what they pushed. The broker calls `get_subscriptions` and
    `push` from the two APIs' handlers and `subscriptions_changed` when a CLIENT_METRICS resource changes."""

    def __init__(self, clock_ms: Callable[[], int], subscriptions: Callable[[], list[Subscription]], *,
                 enabled: bool, max_bytes: int, default_interval_ms: int,
                 new_id: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self._clock_ms = clock_ms
        self._subscriptions = subscriptions
        self._enabled_by_property = enabled
        self.max_bytes = max_bytes
        self.default_interval_ms = default_interval_ms
        self._new_id = new_id
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()  # least recently used first
        self._version = 0
        self._current: list[Subscription] = subscriptions()
        # the export hook (Kafka's ClientTelemetryReceiver.exportMetrics): each accepted, decoded push
        self.on_receive: Callable[[ClientInstance, MetricsData], None] | None = None

    # -- state the broker asks about ---------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """Is the receiver on (the two APIs advertised)?"""
        return self._enabled_by_property or bool(self._current)

    def subscriptions_changed(self) -> None:
        """A CLIENT_METRICS resource changed: instances take the new subscriptions on their next request."""
        self._current = self._subscriptions()
        self._version += 1

    def instances(self, client_id: str | None = None) -> list[ClientInstance]:
        self._expire(self._clock_ms())
        return [i for i in self._instances.values() if client_id is None or i.client.client_id == client_id]

    def prometheus_lines(self) -> list[str]:
        """Every kept data point as `kcoord_client_<metric name>{client_instance_id, client_id, its
        attributes}`: gauges as gauges, sums as counters (monotonic) or gauges, histograms and summaries
        as their _sum and _count."""
        families: dict[str, tuple[str, str, list]] = {}
        for instance in self.instances():
            who = (("client_id", instance.client.client_id), ("client_instance_id", str(instance.instance_id)))
            for p in instance.points.values():
                labels = tuple(sorted(who + tuple((prometheus_name(k), v) for k, v in p.attributes
                                                  if k not in ("client_id", "client_instance_id"))))
                base = "kcoord_client_" + prometheus_name(p.metric)
                if p.count is not None:
                    families.setdefault(base + "_sum", ("untyped", p.metric, []))[2].append((labels, p.value))
                    families.setdefault(base + "_count", ("untyped", p.metric, []))[2].append((labels, p.count))
                    continue
                kind = "counter" if p.kind == "sum" and p.monotonic else "gauge"
                families.setdefault(base, (kind, p.metric, []))[2].append((labels, p.value))
        out: list[str] = []
        for name in sorted(families):
            kind, metric, samples = families[name]
            out += prometheus_family(name, kind, f"{metric}, pushed by clients (KIP-714)", sorted(samples))
        return out

    # -- GetTelemetrySubscriptions ------------------------------------------------------------------
    def get_subscriptions(self, requested_id: uuid.UUID, client: ClientInfo) -> SubscriptionAnswer:
        now = self._clock_ms()
        instance_id = requested_id
        if instance_id == ZERO:
            instance_id = self._new_id()
            while instance_id in self._instances or instance_id in RESERVED_IDS:
                instance_id = self._new_id()
        instance = self._instance(instance_id, client, now)
        # Too early, unless the last push was refused for a reason the client fixes by asking again
        # (KIP-714: after UNKNOWN_SUBSCRIPTION_ID / UNSUPPORTED_COMPRESSION_TYPE it re-requests at once).
        if not instance.may_get(now) and instance.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                                    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            return SubscriptionAnswer(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        instance.last_get_ms = now
        instance.last_error = ErrorCode.NONE
        return SubscriptionAnswer(ErrorCode.NONE, instance_id, instance.subscription_id, instance.push_interval_ms,
                                  instance.metrics)

    # -- PushTelemetry --------------------------------------------------------------------------------
    def push(self, instance_id: uuid.UUID, sub_id: int, terminating: bool, compression: int, payload: bytes,
             client: ClientInfo) -> ErrorCode:
        if instance_id in RESERVED_IDS:
            return ErrorCode.INVALID_REQUEST
        now = self._clock_ms()
        instance = self._instance(instance_id, client, now)
        error = self._validate_push(instance, sub_id, terminating, compression, payload, now)
        instance.terminating = instance.terminating or terminating
        if error == ErrorCode.NONE and payload and self.enabled:
            error = self._receive(instance, compression, payload)
        instance.last_error = error
        return error

    def _validate_push(self, instance: ClientInstance, sub_id: int, terminating: bool, compression: int,
                       payload: bytes, now: int) -> ErrorCode:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST   # nothing is accepted after a terminating push
        if not instance.may_push(now) and not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if sub_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if compression not in KNOWN_COMPRESSION:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if len(payload) > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _receive(self, instance: ClientInstance, compression: int, payload: bytes) -> ErrorCode:
        """The receiver: decode and keep. A payload that does not decode is INVALID_RECORD, Kafka's answer
        when its receiver plugin fails on one."""
        try:
            data = decode_metrics_data(decompress(compression, payload) if compression != NONE else payload)
        except (DecodeError, OtlpError) as exc:
            log.info("client instance %s pushed metrics that do not decode: %s", instance.instance_id, exc)
            return ErrorCode.INVALID_RECORD
        instance.pushes += 1
        instance.resource.update(data.resource)
        if self.on_receive is not None:
            self.on_receive(instance, data)
        points = instance.points
        for point in data.points:
            key = (point.metric, point.attributes)
            if key in points or len(points) < MAX_POINTS_PER_INSTANCE:
                points[key] = point
        return ErrorCode.NONE

    # -- instances ------------------------------------------------------------------------------------
    def _instance(self, instance_id: uuid.UUID, client: ClientInfo, now: int) -> ClientInstance:
        self._expire(now)
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = self._create(instance_id, client)
            self._instances[instance_id] = instance
            while len(self._instances) > MAX_INSTANCES:
                self._instances.popitem(last=False)
        elif instance.subscription_version < self._version:  # subscriptions changed: re-evaluate, fresh timers
            fresh = self._create(instance_id, instance.client)
            fresh.points, fresh.pushes, fresh.resource = instance.points, instance.pushes, instance.resource
            instance = self._instances[instance_id] = fresh
        self._instances.move_to_end(instance_id)
        instance.last_request_ms = now
        return instance

    def _create(self, instance_id: uuid.UUID, client: ClientInfo) -> ClientInstance:
        subscriptions = self._current
        if not subscriptions and self._enabled_by_property:
            metrics, interval = (ALL_METRICS,), self.default_interval_ms
        else:
            selectors = client.selectors(instance_id)
            wanted: set[str] = set()
            interval = DEFAULT_INTERVAL_MS
            for s in subscriptions:
                if s.matches(selectors):
                    wanted.update(s.metrics)
                    interval = min(interval, s.interval_ms)
            metrics = (ALL_METRICS,) if ALL_METRICS in wanted else tuple(sorted(wanted))
        return ClientInstance(instance_id, client, subscription_id(metrics, interval, instance_id), self._version,
                              metrics, interval)

    def _expire(self, now: int) -> None:
        while self._instances:
            oldest = next(iter(self._instances.values()))
            if now - oldest.last_request_ms < oldest.expiry_ms:
                return
            del self._instances[oldest.instance_id]
