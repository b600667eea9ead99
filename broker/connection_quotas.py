"""Connection quotas: what the acceptor does with each new connection, as Kafka's SocketServer does
(core/src/main/scala/kafka/network/SocketServer.scala: ConnectionQuotas.inc, Acceptor.accept).

Kafka's order for a connection from `ip` on `listener` (ConnectionQuotas.inc):
1. waitForConnectionSlot: the connection is recorded in the broker-wide and the listener's creation rate
   (`max.connection.creation.rate`, `listener.name.<l>.max.connection.creation.rate`); the acceptor then
   waits out the longer throttle and until the listener has fewer than `listener.name.<l>.max.connections`
   and the broker fewer than `max.connections`. Nothing is refused: later connections wait in the backlog.
2. recordIpConnectionMaybeThrottle: with a `connection_creation_rate` for the ip (the named ip's, else
   `<default>`'s), the connection is recorded in the ip's rate; over the quota it is taken back from the
   ip, listener and broker rates and refused with ConnectionThrottledException: the acceptor holds the
   socket, reads nothing, and closes it when the throttle ends (DelayedCloseSocket).
3. the per-ip count: at `max.connections.per.ip` (or the ip's `max.connections.per.ip.overrides` entry)
   already, TooManyConnectionsException: closed at once.
The rates are Kafka's Rate over `quota.window.num` samples of `quota.window.size.seconds` (an ip's kept
for an hour after its last connection, ConnectionQuotaEntity.ipQuotaEntity); a throttle is
QuotaUtils.boundedThrottleTime: (rate - quota) / quota * window, at most one window.

Where kcoord differs: Kafka's acceptor thread blocks; kcoord's (broker/acceptor.py) stops reading its
listening socket while a task waits, so other listeners and every open connection are served meanwhile, as
with Kafka's thread per listener. Kafka closes a held socket at the first look after its throttle ended
(the acceptor looks at least every 500 ms); kcoord when it ends. A creation rate without a limit is not
measured (Kafka keeps it as a metric), so a limit set at run time starts from an empty rate. No listener
is exempt from the broker-wide limits (Kafka's protectedListener: its inter-broker listener; kcoord has no
such setting), so there is nothing of Kafka's closing of the least recently used connection when that
listener takes the broker over `max.connections` (maxConnectionsExceeded).

Pure logic with an injected clock: no sockets.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kcoord.broker.quota import SampledRate
from kcoord.metadata.client_quotas import CONNECTION_CREATION_RATE, IP, Quotas

UNLIMITED = 2**31 - 1  # Kafka's defaults for all four settings: Integer.MAX_VALUE
IP_RATE_EXPIRY_MS = 3_600_000  # ConnectionQuotaEntity.ipQuotaEntity: sensorExpiration, one hour


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The broker settings (SocketServerConfigs), with per-listener ones by listener name."""
    max_connections: int = UNLIMITED
    max_connection_creation_rate: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # ip -> max (hosts already resolved)
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    listener_max_connection_creation_rate: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Admission:
    """Step 2 and 3's outcome: accepted, throttled (hold, close after `throttle_ms`) or too many (close now)."""
    accepted: bool
    throttle_ms: int = 0        # > 0: ConnectionThrottledException
    max_connections: int = 0    # refused by the per-ip count: TooManyConnectionsException's limit


ACCEPTED = Admission(True)


def normalized_ip(text: str) -> str:
    """An address as one spelling (Kafka compares InetAddress objects): `::1` and `0:0::1` are one ip."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


class _Rate:
    """A Sensor with a Rate and a quota bound (Sensor.record then checkQuotas: the rate must stay <= bound)."""

    __slots__ = ("rate",)

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        self.rate = SampledRate(samples, window_ms, now_ms)

    def record_and_throttle_ms(self, bound: int, now_ms: int, max_throttle_ms: int) -> int:
        """ConnectionQuotas.recordAndGetThrottleTimeMs: record one connection; over the bound, the throttle."""
        self.rate.record(1.0, now_ms)
        measured = self.rate.rate(now_ms)
        if measured <= bound:
            return 0
        throttle = round((measured - bound) / bound * self.rate.window_size_ms(now_ms))
        return min(throttle, max_throttle_ms)

    def unrecord(self, now_ms: int) -> None:
        self.rate.record(-1.0, now_ms)


class ConnectionQuotas:
    """Counts of open connections by ip and listener, and the creation rates the limits apply to."""

    def __init__(self, clock_ms: Callable[[], int], samples: int, window_ms: int,
                 limits: ConnectionLimits | None = None) -> None:
        self._clock_ms = clock_ms
        self._samples, self._window_ms = samples, window_ms
        self._max_throttle_ms = window_ms  # ConnectionQuotas.maxThrottleTimeMs: one quota window
        self.limits = limits or ConnectionLimits()
        self._ip_rates: dict[str, int] = {}    # named ip -> connection_creation_rate
        self._default_ip_rate: int | None = None
        self._ip_sensors: dict[str, _Rate] = {}
        self._next_expiry_ms = 0
        now = clock_ms()
        self._broker_rate = _Rate(samples, window_ms, now)
        self._listener_rates: dict[str, _Rate] = {}
        self.counts: dict[str, int] = {}             # ip -> open connections
        self.listener_counts: dict[str, int] = {}    # listener -> open connections
        self.total = 0

    # -- the quota values ------------------------------------------------------------------------
    def configure(self, limits: ConnectionLimits) -> None:
        """The broker settings changed (dynamically): new connections get the new limits."""
        self.limits = limits

    def update_ip_quotas(self, quotas: Quotas) -> None:
        """The client quota entities changed: the ip entities' connection_creation_rate (named ip beats
        `<default>`, ConnectionQuotas.updateIpConnectionRateQuota / connectionRateForIp)."""
        named: dict[str, int] = {}
        default: int | None = None
        for entity, values in quotas.items():
            rate = values.get(CONNECTION_CREATION_RATE)
            types = dict(entity)
            if rate is None or set(types) != {IP}:
                continue
            if types[IP] is None:
                default = int(rate)
            else:
                named[normalized_ip(types[IP])] = int(rate)  # pyright: ignore[reportArgumentType]  (not None here)
        self._ip_rates, self._default_ip_rate = named, default
        if not named and default is None:
            self._ip_sensors.clear()

    def ip_rate(self, ip: str) -> int | None:
        """The ip's connection_creation_rate, None when none applies (Kafka's default: Integer.MAX_VALUE, off)."""
        rate = self._ip_rates.get(ip, self._default_ip_rate) if self._ip_rates else self._default_ip_rate
        return None if rate is None or rate >= UNLIMITED else rate

    # -- the acceptor's steps ----------------------------------------------------------------------
    def record_connection(self, listener: str) -> int:
        """waitForConnectionSlot's first half (recordConnectionAndGetThrottleTimeMs): record the connection in
        the broker's and the listener's rate; the longer throttle, in ms, the acceptor waits before going on.
        A rate without a limit is not kept (Kafka keeps it as a metric), so a limit set later starts from none."""
        limits = self.limits
        broker_bound = limits.max_connection_creation_rate
        listener_bound = limits.listener_max_connection_creation_rate.get(listener, UNLIMITED) \
            if limits.listener_max_connection_creation_rate else UNLIMITED
        if broker_bound >= UNLIMITED and listener_bound >= UNLIMITED:
            return 0
        now = self._clock_ms()
        throttle = 0
        if broker_bound < UNLIMITED:
            throttle = self._broker_rate.record_and_throttle_ms(broker_bound, now, self._max_throttle_ms)
        if listener_bound < UNLIMITED:
            throttle = max(throttle, self._listener_rate(listener, now).record_and_throttle_ms(
                listener_bound, now, self._max_throttle_ms))
        return throttle

    def slot_available(self, listener: str) -> bool:
        """connectionSlotAvailable: below the listener's max.connections and the broker's."""
        limits = self.limits
        if self.listener_counts.get(listener, 0) >= limits.listener_max_connections.get(listener, UNLIMITED):
            return False
        return self.total < limits.max_connections

    def admit(self, listener: str, ip: str) -> Admission:
        """Steps 2 and 3 (recordIpConnectionMaybeThrottle, then the per-ip count); an accepted connection is
        counted until `closed`."""
        rate = self.ip_rate(ip)
        if rate is not None:
            now = self._clock_ms()
            self._expire_ip_sensors(now)
            sensor = self._ip_sensors.get(ip)
            if sensor is None:
                sensor = self._ip_sensors[ip] = _Rate(self._samples, self._window_ms, now)
            throttle = sensor.record_and_throttle_ms(rate, now, self._max_throttle_ms)
            if throttle > 0:  # not accepted: taken back from every rate it was recorded in (updateListenerMetrics)
                sensor.unrecord(now)
                limits = self.limits
                if limits.max_connection_creation_rate < UNLIMITED:
                    self._broker_rate.unrecord(now)
                if limits.listener_max_connection_creation_rate.get(listener, UNLIMITED) < UNLIMITED:
                    self._listener_rate(listener, now).unrecord(now)
                return Admission(False, throttle_ms=throttle)
        limits = self.limits
        limit = limits.per_ip_overrides.get(ip, limits.max_connections_per_ip) if limits.per_ip_overrides \
            else limits.max_connections_per_ip
        if self.counts.get(ip, 0) >= limit:
            return Admission(False, max_connections=limit)
        self.count(listener, ip)
        return ACCEPTED

    def count(self, listener: str, ip: str) -> None:
        """Count an accepted connection (admit does; a connection accepted while nothing is limited comes here
        straight), until `closed`."""
        self.counts[ip] = self.counts.get(ip, 0) + 1
        self.listener_counts[listener] = self.listener_counts.get(listener, 0) + 1
        self.total += 1

    @property
    def limited(self) -> bool:
        """Whether any connection quota or limit is set: else every connection is accepted and only counted."""
        limits = self.limits
        return (self._default_ip_rate is not None or bool(self._ip_rates)
                or min(limits.max_connections, limits.max_connection_creation_rate, limits.max_connections_per_ip)
                < UNLIMITED or bool(limits.per_ip_overrides)
                or any(v < UNLIMITED for v in limits.listener_max_connections.values())
                or any(v < UNLIMITED for v in limits.listener_max_connection_creation_rate.values()))

    def closed(self, listener: str, ip: str) -> None:
        """An accepted connection ended (ConnectionQuotas.dec)."""
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.listener_counts[listener] = max(0, self.listener_counts.get(listener, 0) - 1)
        self.total = max(0, self.total - 1)

    def _listener_rate(self, listener: str, now_ms: int) -> _Rate:
        rate = self._listener_rates.get(listener)
        if rate is None:
            rate = self._listener_rates[listener] = _Rate(self._samples, self._window_ms, now_ms)
        return rate

    def _expire_ip_sensors(self, now_ms: int) -> None:
        """Forget the rates of ips idle for an hour (Kafka's sensor expiration), looked at once a minute."""
        if now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + 60_000
        for ip in [ip for ip, s in self._ip_sensors.items() if s.rate.idle_ms(now_ms) >= IP_RATE_EXPIRY_MS]:
            del self._ip_sensors[ip]
