"""controller_mutation_rate in process: the token bucket, strict and permissive quotas, the throttle time.
Injected clock, no sockets.

Sources: core/src/main/scala/kafka/server/ControllerMutationQuotaManager.scala (StrictControllerMutationQuota,
PermissiveControllerMutationQuota, throttleTimeMs, AbstractControllerMutationQuota.throttleTime),
clients/src/main/java/org/apache/kafka/common/metrics/stats/TokenBucket.java (refill, burst) and
Sensor.checkQuotas (a TokenBucket is violated below zero); ControllerApis.handleCreateTopics /
handleCreatePartitions / handleDeleteTopics for the versions from which the quota is strict."""
from __future__ import annotations

import pytest

from kcoord.broker.controller_mutation_quota import (
    ControllerMutationQuotaManager,
    MutationQuotaConfig,
    TokenBucket,
)
from kcoord.metadata.client_quotas import CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE


def entity(**pairs):
    return frozenset((k.replace("_", "-"), v) for k, v in pairs.items())


def manager(now: list[int], rate: float = 2.0, samples: int = 11) -> ControllerMutationQuotaManager:
    mgr = ControllerMutationQuotaManager(lambda: now[0], MutationQuotaConfig(samples, 1000))
    mgr.update({entity(client_id="admin"): {CONTROLLER_MUTATION_RATE: rate},
                entity(client_id="other"): {CONTROLLER_MUTATION_RATE: rate}})
    return mgr


def test_the_bucket_refills_at_the_quota_up_to_its_burst():
    """TokenBucket: burst = samples * window * quota; tokens may go below zero, refill caps at the burst."""
    bucket = TokenBucket(burst=22.0, now_ms=0)
    bucket.record(30, quota=2.0, burst=22.0, now_ms=0)
    assert bucket.tokens == -8.0
    assert bucket.measure(2.0, 22.0, 1500) == pytest.approx(-5.0)
    assert bucket.measure(2.0, 22.0, 100_000) == 22.0


def test_strict_accepts_any_size_while_the_bucket_is_not_below_zero_then_refuses():
    """StrictControllerMutationQuota.record: checkQuotas first (tokens < 0 is the violation), then records
    without checking, so one mutation larger than the bucket passes and the next is refused."""
    now = [1_000_000]
    mgr = manager(now)                                      # 2 partitions/s, burst 22
    quota = mgr.quota_for("ANONYMOUS", "admin", "CreateTopics", 6)
    assert quota.try_record(30)                             # 22 - 30 = -8: accepted all the same
    assert not quota.try_record(1)                          # below zero: THROTTLING_QUOTA_EXCEEDED
    assert quota.throttle_time_ms() == 4000                 # -(-8) / 2 per second
    now[0] += 1000
    assert quota.throttle_time_ms() == 3000                 # less the time since the violation
    now[0] += 3000
    later = mgr.quota_for("ANONYMOUS", "admin", "CreateTopics", 7)
    assert later.try_record(1) and later.throttle_time_ms() == 0   # back at zero: accepted, not throttled


def test_permissive_accepts_everything_and_throttles_once_below_zero():
    """PermissiveControllerMutationQuota.record: records, then checks; nothing is refused."""
    now = [5_000]
    mgr = manager(now)
    quota = mgr.quota_for("ANONYMOUS", "admin", "CreateTopics", 5)
    assert quota.try_record(20) and quota.throttle_time_ms() == 0   # 2 tokens left
    assert quota.try_record(6) and quota.throttle_time_ms() == 2000  # -4 tokens: 2 s
    assert quota.try_record(2) and quota.throttle_time_ms() == 3000  # -6: the last violation counts


@pytest.mark.parametrize(("api", "version", "strict"), [
    ("CreateTopics", 5, False), ("CreateTopics", 6, True),
    ("CreatePartitions", 2, False), ("CreatePartitions", 3, True),
    ("DeleteTopics", 4, False), ("DeleteTopics", 5, True),
])
def test_strict_from_the_versions_controller_apis_names(api, version, strict):
    now = [0]
    mgr = manager(now, rate=1.0, samples=1)                 # burst 1
    quota = mgr.quota_for("ANONYMOUS", "admin", api, version)
    assert quota.try_record(2)
    assert quota.try_record(1) is not strict


def test_buckets_are_per_entity_sharing_and_no_quota_costs_nothing():
    now = [0]
    mgr = ControllerMutationQuotaManager(lambda: now[0], MutationQuotaConfig(1, 1000))
    mgr.update({entity(client_id="admin"): {PRODUCER_BYTE_RATE: 10.0}})
    assert not mgr.active                                   # another key only: the handlers pay nothing
    free = mgr.quota_for("ANONYMOUS", "admin", "CreateTopics", 7)
    assert all(free.try_record(10**6) for _ in range(3)) and free.throttle_time_ms() == 0
    mgr.update({entity(user="alice"): {CONTROLLER_MUTATION_RATE: 1.0}})
    assert mgr.active
    a1 = mgr.quota_for("alice", "one", "CreateTopics", 7)
    assert a1.try_record(5)
    assert not mgr.quota_for("alice", "two", "CreateTopics", 7).try_record(1)   # the user's bucket is shared
    assert mgr.quota_for("bob", "one", "CreateTopics", 7).try_record(100)       # bob has no quota


def test_a_refund_gives_back_what_the_controller_then_refused():
    now = [0]
    mgr = manager(now, rate=1.0, samples=1)
    quota = mgr.quota_for("ANONYMOUS", "admin", "DeleteTopics", 6)
    assert quota.try_record(5)
    quota.refund(5)
    assert quota.try_record(1)                              # tokens back at 1: not below zero
    assert quota.try_record(1)
    assert not quota.try_record(1)
    permissive = mgr.quota_for("ANONYMOUS", "other", "DeleteTopics", 4)   # its own bucket: another client
    assert permissive.try_record(3) and permissive.throttle_time_ms() == 2000
    permissive.refund(3)
    assert permissive.throttle_time_ms() == 0                # nothing left to throttle for


def test_a_new_quota_value_keeps_the_tokens_and_removing_it_forgets_them():
    now = [0]
    mgr = manager(now, rate=1.0, samples=1)
    assert mgr.quota_for("ANONYMOUS", "admin", "CreateTopics", 7).try_record(3)     # tokens -2
    mgr.update({entity(client_id="admin"): {CONTROLLER_MUTATION_RATE: 100.0}})
    assert not mgr.quota_for("ANONYMOUS", "admin", "CreateTopics", 7).try_record(1)  # still below zero
    now[0] = 20                                              # 100/s for 20 ms: +2, at zero
    assert mgr.quota_for("ANONYMOUS", "admin", "CreateTopics", 7).try_record(1)
    mgr.update({})
    mgr.update({entity(client_id="admin"): {CONTROLLER_MUTATION_RATE: 1.0}})
    assert mgr.quota_for("ANONYMOUS", "admin", "CreateTopics", 7).try_record(1)     # a fresh, full bucket
