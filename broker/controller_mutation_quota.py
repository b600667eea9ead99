"""controller_mutation_rate (KIP-599): partitions created or deleted per second per (user, client-id).

Kafka's ControllerMutationQuotaManager (core/.../server/ControllerMutationQuotaManager.scala) measures it
with a token bucket (clients/.../metrics/stats/TokenBucket.java), not the sampled rate of the other quotas:
the bucket refills at the quota per second up to a burst of quota * `controller.quota.window.num` *
`controller.quota.window.size.seconds`, a mutation takes its partition count out, and the quota is broken
while the bucket is below zero; the throttle time is what brings it back to zero (-tokens / quota s).

Each CreateTopics / CreatePartitions / DeleteTopics gets one MutationQuota (ControllerApis.newQuotaFor):
- strict from CreateTopics v6, CreatePartitions v3, DeleteTopics v5: a topic is refused with
  THROTTLING_QUOTA_EXCEEDED while the bucket is below zero, and is otherwise accepted whatever its size
  (StrictControllerMutationQuota checks before it records);
- permissive before those versions: every topic is accepted, the request is throttled once the bucket
  is below zero (PermissiveControllerMutationQuota records, then checks).
Either way the response carries the throttle time and the channel is muted for it
(RequestHandlerHelper.sendResponseMaybeThrottleWithControllerQuota).

Cluster mode: the quota is per node, as Kafka's are per broker; only the controller answers mutations,
so in effect it is the controller's bucket that counts. Pure logic with an injected clock; `active` is
False while no controller_mutation_rate is defined and handlers then pay nothing but that attribute read.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kcoord.broker.quota import resolve
from kcoord.metadata.client_quotas import CONTROLLER_MUTATION_RATE, Entity

if TYPE_CHECKING:
    from kcoord.broker.context import RequestContext

THROTTLED_MESSAGE = "The throttling quota has been exceeded."  # Errors.THROTTLING_QUOTA_EXCEEDED's message

# The first version at which each mutation API is strict (ControllerApis: newQuotaFor(request, strictSinceVersion))
STRICT_SINCE = {"CreateTopics": 6, "CreatePartitions": 3, "DeleteTopics": 5}


class TokenBucket:
    """Kafka's TokenBucket: tokens refill at `quota` a second up to `burst`; a record takes tokens out."""

    __slots__ = ("tokens", "last_ms")

    def __init__(self, burst: float, now_ms: int) -> None:
        self.tokens = burst          # a new (user, client-id) starts with the full burst, as Kafka's does
        self.last_ms = now_ms

    def measure(self, quota: float, burst: float, now_ms: int) -> float:
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms
        return self.tokens

    def record(self, permits: float, quota: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.measure(quota, burst, now_ms) - permits)


@dataclass(frozen=True, slots=True)
class MutationQuotaConfig:
    samples: int = 11       # controller.quota.window.num
    window_ms: int = 1000   # controller.quota.window.size.seconds


class MutationQuota:
    """One request's view of its (user, client-id) bucket. Unbounded (quota None): records nothing."""

    __slots__ = ("_bucket", "_quota", "_burst", "_strict", "_clock_ms", "_throttle_ms", "_throttled_at_ms")

    def __init__(self, bucket: TokenBucket | None, quota: float, burst: float, strict: bool,
                 clock_ms: Callable[[], int]) -> None:
        self._bucket, self._quota, self._burst, self._strict = bucket, quota, burst, strict
        self._clock_ms = clock_ms
        self._throttle_ms = 0
        self._throttled_at_ms = 0

    def try_record(self, permits: int) -> bool:
        """Charge `permits` partitions; False: refused (strict, the bucket already below zero)."""
        bucket = self._bucket
        if bucket is None:
            return True
        now = self._clock_ms()
        if self._strict:
            tokens = bucket.measure(self._quota, self._burst, now)
            if tokens < 0:
                self._violated(tokens, now)
                return False
            bucket.record(permits, self._quota, self._burst, now)
            return True
        bucket.record(permits, self._quota, self._burst, now)
        if bucket.tokens < 0:
            self._violated(bucket.tokens, now)
        return True

    def refund(self, permits: int) -> None:
        """Give back a charge for a mutation the controller then refused: Kafka checks the quota after every
        other check, which kcoord's controller makes only as it writes."""
        if self._bucket is None:
            return
        self._bucket.record(-permits, self._quota, self._burst, self._clock_ms())
        if not self._strict and self._bucket.tokens >= 0:  # the charge that broke the quota is gone
            self._throttle_ms = 0

    def _violated(self, tokens: float, now_ms: int) -> None:
        self._throttle_ms = round(-tokens / self._quota * 1000)  # ControllerMutationQuotaManager.throttleTimeMs
        self._throttled_at_ms = now_ms

    def throttle_time_ms(self) -> int:
        """The last violation's throttle time less the time since (AbstractControllerMutationQuota.throttleTime)."""
        if not self._throttle_ms:
            return 0
        return max(0, self._throttle_ms - (self._clock_ms() - self._throttled_at_ms))


class ControllerMutationQuotaManager:
    """The token buckets of the (user, client-id) pairs a controller_mutation_rate applies to."""

    def __init__(self, clock_ms: Callable[[], int], config: MutationQuotaConfig) -> None:
        self._clock_ms = clock_ms
        self._config = config
        self._quotas: dict[Entity, dict[str, float]] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self.active = False

    def update(self, quotas: dict[Entity, dict[str, float]]) -> None:
        """The quota entities changed (ClientQuotaStore.on_change); buckets keep their tokens, as Kafka's
        sensors keep theirs when only the bound changes."""
        self._quotas = quotas
        self.active = any(CONTROLLER_MUTATION_RATE in q for q in quotas.values())
        if not self.active:
            self._buckets.clear()

    def quota_for(self, user: str, client_id: str, api: str, api_version: int) -> MutationQuota:
        """The request's quota: strict or permissive by version (ControllerMutationQuotaManager.newQuotaFor)."""
        found = resolve(self._quotas, CONTROLLER_MUTATION_RATE, user, client_id) if self.active else None
        if found is None:
            return MutationQuota(None, 0.0, 0.0, False, self._clock_ms)
        tags, quota = found
        burst = quota * self._config.samples * self._config.window_ms / 1000.0
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket(burst, self._clock_ms())
        return MutationQuota(bucket, quota, burst, api_version >= STRICT_SINCE[api], self._clock_ms)


def quota_for_request(ctx: RequestContext, api: str) -> MutationQuota:
    return ctx.broker.mutation_quota.quota_for(ctx.session.principal.name, ctx.client_id or "", api, ctx.api_version)


def throttle_response(ctx: RequestContext, quota: MutationQuota) -> int:
    """The throttle time for the response; the server mutes the channel that long after answering."""
    throttle_ms = quota.throttle_time_ms()
    ctx.throttle_ms = max(ctx.throttle_ms, throttle_ms)
    return throttle_ms
