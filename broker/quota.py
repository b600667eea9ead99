"""Client quota enforcement: produce and fetch byte rates and request time per (user, client-id), measured as
Kafka measures them, and the throttle time a request that breaks its quota gets (KIP-13, KIP-124, KIP-219).

Which quota applies (DefaultQuotaCallback in core/.../ClientQuotaManager.scala: quotaMetricTags and
quotaLimit): for each quota key on its own, the first entity in this order that sets it --
  user+client-id, user+<default client-id>, user, <default user>+client-id, <default user>+<default
  client-id>, <default user>, client-id, <default client-id>;
the entity also says who shares the measured rate: (user, client-id), (user, -) or (-, client-id).

The rate is Kafka's Rate over a SampledStat (clients/.../metrics/stats/Rate.java, SampledStat.java):
`quota.window.num` samples of `quota.window.size.seconds` each, the rate is their sum over the time they
span, counted as at least (samples - 1) whole windows. A request that takes the rate above the quota is
throttled for (rate - quota) / quota * that window (server-common/.../quota/QuotaUtils.throttleTime).

Pure logic with an injected clock; `active` is False while no such quota is defined, so the serving path
pays a few attribute reads per Produce / Fetch / request (about 50 ns in all on the general path, timeit;
nothing on the frame fast paths, which stay on while no request_percentage quota exists).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kcoord.metadata.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    Entity,
)

# DefaultQuotaCallback's precedence: (user part, client part, which of the two share the rate);
# "name" is the request's own, "default" the type's default, None the type absent from the entity.
_ORDER = (("name", "name", "both"), ("name", "default", "both"), ("name", None, "user"),
          ("default", "name", "both"), ("default", "default", "both"), ("default", None, "user"),
          (None, "name", "client"), (None, "default", "client"))


def _entity(user_part: str | None, client_part: str | None, user: str, client_id: str) -> Entity:
    pairs: list[tuple[str, str | None]] = []
    if user_part is not None:
        pairs.append((USER, user if user_part == "name" else None))
    if client_part is not None:
        pairs.append((CLIENT_ID, client_id if client_part == "name" else None))
    return frozenset(pairs)


def resolve(quotas: dict[Entity, dict[str, float]], key: str, user: str, client_id: str
            ) -> tuple[tuple[str, str], float] | None:
    """((user, client-id) sharing the rate, the quota) for a request, or None when no entity sets `key`."""
    for user_part, client_part, shared in _ORDER:
        limit = quotas.get(_entity(user_part, client_part, user, client_id), {}).get(key)
        if limit is not None:
            tags = (user if shared != "client" else "", client_id if shared != "user" else "")
            return tags, limit
    return None


class SampledRate:
    """Kafka's Rate over a SampledStat of `samples` windows of `window_ms` (a sum per window), as Kafka 4 keeps
    it: one slot more than `samples` for a sample that overlaps the measured window, a sample dropped once its
    last event is `samples` windows old, a window of at least 1 ms."""

    __slots__ = ("samples", "window_ms", "_starts", "_last", "_values", "_current")

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        self.samples, self.window_ms = samples, window_ms
        self._starts = [now_ms]
        self._last = [now_ms]  # each sample's last event (Sample.lastEventMs)
        self._values = [0.0]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        current = self._current
        if now_ms - self._starts[current] >= self.window_ms:  # the sample is complete: the next one
            current = self._current = (current + 1) % (self.samples + 1)
            if current >= len(self._starts):
                self._starts.append(now_ms)
                self._last.append(now_ms)
                self._values.append(0.0)
            else:
                self._starts[current], self._values[current] = now_ms, 0.0
        self._values[current] += value
        self._last[current] = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, last in enumerate(self._last):
            if now_ms - last >= expire:
                self._starts[i] = self._last[i] = now_ms
                self._values[i] = 0.0

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full, least = elapsed // self.window_ms, self.samples - 1
        if full < least:
            elapsed += (least - full) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_size_ms(now_ms)  # first: it purges the obsolete samples
        return sum(self._values) / (window / 1000.0)

    def idle_ms(self, now_ms: int) -> int:
        """Time since the last event (a sensor's expiration counts from it)."""
        return now_ms - max(self._last)


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    samples: int = 11       # quota.window.num
    window_ms: int = 1000   # quota.window.size.seconds


class ClientQuotaManager:
    """One per quota key (produce: producer_byte_rate, fetch: consumer_byte_rate): the rates of the
    (user, client-id) pairs that have a quota, and their throttle times."""

    def __init__(self, key: str, clock_ms: Callable[[], int], config: QuotaConfig,
                 max_throttle_ms: int | None = None) -> None:
        self.key = key
        self._max_throttle_ms = max_throttle_ms
        self._clock_ms = clock_ms
        self._config = config
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._rates: dict[tuple[str, str], SampledRate] = {}
        self.active = False

    def update(self, quotas: dict[Entity, dict[str, float]]) -> None:
        """The quota entities changed (ClientQuotaStore.on_change)."""
        self._quotas = quotas
        self.active = any(self.key in q for q in quotas.values())
        if not self.active:
            self._rates.clear()

    def record(self, user: str, client_id: str, value: float) -> int:
        """Record `value` bytes for the request's (user, client-id); the throttle time in ms (0: within quota)."""
        found = resolve(self._quotas, self.key, user, client_id)
        if found is None:
            return 0
        tags, limit = found
        now = self._clock_ms()
        rate = self._rates.get(tags)
        if rate is None:
            rate = self._rates[tags] = SampledRate(self._config.samples, self._config.window_ms, now)
        rate.record(value, now)
        measured = rate.rate(now)
        if measured <= limit:
            return 0
        throttle_ms = round((measured - limit) / limit * rate.window_size_ms(now))
        return throttle_ms if self._max_throttle_ms is None else min(throttle_ms, self._max_throttle_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """What the quota allows in one measuring window, (samples - 1) windows: a fetch asks for no more
        (ClientQuotaManager.getMaxValueInQuotaWindow; KafkaApis.handleFetchRequest's fetchMaxBytes), else a
        response bigger than that would be throttled and answered empty every time. None: no quota."""
        found = resolve(self._quotas, self.key, user, client_id)
        if found is None:
            return None
        return found[1] * (self._config.samples - 1) * self._config.window_ms / 1000.0

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back a recorded value (a throttled fetch answers empty: ClientQuotaManager.unrecordQuotaSensor)."""
        found = resolve(self._quotas, self.key, user, client_id)
        if found is not None and found[0] in self._rates:
            self._rates[found[0]].record(-value, self._clock_ms())


def quota_managers(clock_ms: Callable[[], int], config: QuotaConfig
                   ) -> tuple[ClientQuotaManager, ClientQuotaManager, ClientQuotaManager]:
    """(produce, fetch, request) managers. The request quota counts the time spent serving a client's
    requests as a percentage of one thread (ClientRequestQuotaManager: nanosToPercentage), its throttle at
    most one window (maxThrottleTimeMs)."""
    return (ClientQuotaManager(PRODUCER_BYTE_RATE, clock_ms, config),
            ClientQuotaManager(CONSUMER_BYTE_RATE, clock_ms, config),
            ClientQuotaManager(REQUEST_PERCENTAGE, clock_ms, config, max_throttle_ms=config.window_ms))
