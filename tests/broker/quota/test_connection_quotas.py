"""Connection quotas in process (kcoord.broker.connection_quotas): what the acceptor does with a connection
from an ip on a listener. Injected clock, no sockets.

Kafka's side: core/src/main/scala/kafka/network/SocketServer.scala, class ConnectionQuotas (inc,
waitForConnectionSlot, recordConnectionAndGetThrottleTimeMs, recordIpConnectionMaybeThrottle,
updateListenerMetrics, recordAndGetThrottleTimeMs, connectionSlotAvailable, updateIpConnectionRateQuota,
connectionRateForIp, dec); server-common/.../quota/QuotaUtils.java boundedThrottleTime;
clients/.../metrics/stats/Rate.java windowSize and SampledStat.java (samples + 1 slots, purge by last event).
"""
from __future__ import annotations

from kcoord.broker.connection_quotas import ConnectionLimits, ConnectionQuotas
from kcoord.broker.quota import SampledRate
from kcoord.metadata.client_quotas import CONNECTION_CREATION_RATE, IP

L = "PLAINTEXT"


def ip_entity(ip: str | None) -> frozenset:
    return frozenset({(IP, ip)})


def quotas(now: list[int], limits: ConnectionLimits | None = None, samples: int = 11) -> ConnectionQuotas:
    return ConnectionQuotas(lambda: now[0], samples, 1000, limits)


def connect(q: ConnectionQuotas, ip: str, listener: str = L):
    """One connection through the acceptor's steps, in ConnectionQuotas.inc's order."""
    wait_ms = q.record_connection(listener)
    return wait_ms, q.admit(listener, ip)


def test_an_ip_over_its_rate_is_throttled_by_the_excess_and_not_counted():
    """recordIpConnectionMaybeThrottle + QuotaUtils.throttleTime: 2 a second over a young rate's 10 s window
    admits 20; the 21st measures 2.1/s, throttled (2.1 - 2) / 2 * 10 s = 500 ms, and is taken back, so the
    22nd measures the same."""
    now = [0]
    q = quotas(now)
    q.update_ip_quotas({ip_entity("127.0.0.1"): {CONNECTION_CREATION_RATE: 2.0}})
    for _ in range(20):
        assert connect(q, "127.0.0.1")[1].accepted
    for _ in range(2):
        wait_ms, admission = connect(q, "127.0.0.1")
        assert (wait_ms, admission.accepted, admission.throttle_ms) == (0, False, 500)
    assert q.counts == {"127.0.0.1": 20} and q.total == 20
    assert connect(q, "10.0.0.9")[1].accepted              # another ip: no quota
    now[0] = 11_000                                        # the 20 are in the window's first sample still
    assert connect(q, "127.0.0.1")[1].accepted             # 21 over 11 s


def test_a_throttle_is_the_excess_over_the_quota_times_the_window():
    """QuotaUtils.throttleTime over Rate.windowSize: 1 a second, 11 connections in a young 10 s window is
    10% over: 1 s."""
    q = quotas([0])
    q.update_ip_quotas({ip_entity(None): {CONNECTION_CREATION_RATE: 1.0}})
    for _ in range(10):
        assert connect(q, "10.1.1.1")[1].accepted
    assert connect(q, "10.1.1.1")[1].throttle_ms == 1000


def test_a_named_ip_beats_the_default_and_removal_turns_it_off():
    """connectionRateForIp: the ip's own rate, else the default's; no ip quota at all: nothing recorded."""
    q = quotas([0])
    q.update_ip_quotas({ip_entity(None): {CONNECTION_CREATION_RATE: 100.0},
                        ip_entity("::1"): {CONNECTION_CREATION_RATE: 1.0}})
    assert q.ip_rate("::1") == 1 and q.ip_rate("10.0.0.1") == 100
    q.update_ip_quotas({ip_entity("0:0::1"): {CONNECTION_CREATION_RATE: 3.0}})  # one ip, however written
    assert q.ip_rate("::1") == 3 and q.ip_rate("10.0.0.1") is None
    q.update_ip_quotas({frozenset({("user", "u")}): {"producer_byte_rate": 5.0}})
    assert q.ip_rate("::1") is None
    for _ in range(100):
        assert connect(q, "::1")[1].accepted


def test_a_new_rate_applies_to_the_rate_already_measured():
    """updateIpConnectionRateQuota only changes the sensor's bound: what was measured still counts."""
    q = quotas([0])
    q.update_ip_quotas({ip_entity(None): {CONNECTION_CREATION_RATE: 10.0}})
    for _ in range(10):
        assert connect(q, "10.0.0.1")[1].accepted
    q.update_ip_quotas({ip_entity("10.0.0.1"): {CONNECTION_CREATION_RATE: 1.0}})
    assert connect(q, "10.0.0.1")[1].throttle_ms == 1000


def test_over_max_connections_per_ip_is_refused_and_a_close_frees_the_slot():
    """inc: TooManyConnectionsException once the ip has max.connections.per.ip (or its override) open;
    dec frees one."""
    q = quotas([0], ConnectionLimits(max_connections_per_ip=2, per_ip_overrides={"10.0.0.2": 3}))
    assert [connect(q, "10.0.0.1")[1].accepted for _ in range(3)] == [True, True, False]
    assert connect(q, "10.0.0.1")[1].max_connections == 2
    assert [connect(q, "10.0.0.2")[1].accepted for _ in range(4)] == [True, True, True, False]
    q.closed(L, "10.0.0.1")
    assert connect(q, "10.0.0.1")[1].accepted
    assert q.counts == {"10.0.0.1": 2, "10.0.0.2": 3} and q.total == 5


def test_broker_and_listener_rates_make_the_acceptor_wait_for_the_longer_throttle():
    """recordConnectionAndGetThrottleTimeMs: recorded in both rates; the longer throttle, at most a window."""
    q = quotas([0], ConnectionLimits(max_connection_creation_rate=2, listener_max_connection_creation_rate={L: 1}))
    waits = [q.record_connection(L) for _ in range(12)]
    assert waits[:10] == [0] * 10
    assert waits[10] == 1000                               # the listener's: (1.1 - 1) / 1 * 10 s
    assert waits[11] == 1000                               # (1.2 - 1) * 10 s = 2 s, bounded by one window
    assert q.record_connection("OTHER") == 0               # the broker's 13/10 s is within 2 a second
    assert [q.record_connection("OTHER") for _ in range(8)][-1] == 500  # 21/10 s: (2.1 - 2) / 2 * 10 s


def test_an_ip_throttled_connection_is_taken_back_from_the_broker_and_listener_rates():
    """updateListenerMetrics: a connection the ip quota refuses does not count towards max.connection.creation.rate."""
    q = quotas([0], ConnectionLimits(max_connection_creation_rate=2))
    q.update_ip_quotas({ip_entity("10.0.0.1"): {CONNECTION_CREATION_RATE: 1.0}})
    results = [connect(q, "10.0.0.1") for _ in range(40)]
    assert [a.accepted for _, a in results].count(True) == 10
    assert all(wait_ms == 0 for wait_ms, _ in results)    # 10 recorded broker-wide, never 21


def test_connection_slots_by_broker_and_listener():
    """connectionSlotAvailable: below the listener's max.connections, then the broker's."""
    q = quotas([0], ConnectionLimits(max_connections=3, listener_max_connections={"INTERNAL": 1}))
    assert q.slot_available("INTERNAL") and q.admit("INTERNAL", "10.0.0.1").accepted
    assert not q.slot_available("INTERNAL") and q.slot_available(L)
    q.admit(L, "10.0.0.1")
    q.admit(L, "10.0.0.2")
    assert not q.slot_available(L)
    q.closed("INTERNAL", "10.0.0.1")
    assert q.slot_available(L) and q.slot_available("INTERNAL")
    q.configure(ConnectionLimits(max_connections=2))      # dynamic: applies to the next connection
    assert not q.slot_available(L)


def test_an_ips_rate_is_forgotten_an_hour_after_its_last_connection():
    """ConnectionQuotaEntity.ipQuotaEntity: the ip's sensor expires after an hour without a record."""
    now = [0]
    q = quotas(now)
    q.update_ip_quotas({ip_entity(None): {CONNECTION_CREATION_RATE: 1.0}})
    for _ in range(12):
        connect(q, "10.0.0.1")
    now[0] = 3_600_000
    connect(q, "10.0.0.2")                                # a look at the idle sensors
    assert set(q._ip_sensors) == {"10.0.0.2"}


def test_kafka_4_sampled_rate_keeps_an_overlapping_sample_and_purges_by_last_event():
    """SampledStat (Kafka 4): samples + 1 slots, so a sample whose last event is within the measured window
    is kept although newer samples started since; a sample goes once its last event is samples windows old."""
    rate = SampledRate(2, 1000, 0)
    for t in (0, 999, 1000, 2000):                        # slots starting at 0, 1000, 2000
        rate.record(1, t)
    assert rate.rate(2500) == 4 / 2.5                     # the first slot's last event (999) is 1.5 s old
    assert rate.rate(2999) == 2 / 1.999                   # now 2 s old: purged
    assert rate.rate(4000) == 0


def test_limited_while_any_quota_or_limit_is_set():
    """Kafka's defaults limit nothing (Integer.MAX_VALUE everywhere, QuotaConfig.IP_CONNECTION_RATE_DEFAULT):
    then the loop's own server accepts and connections are only counted."""
    q = quotas([0])
    assert not q.limited
    q.count(L, "10.0.0.1")
    assert q.counts == {"10.0.0.1": 1} and q.total == 1
    q.update_ip_quotas({ip_entity(None): {CONNECTION_CREATION_RATE: 5.0}})
    assert q.limited
    q.update_ip_quotas({})
    assert not q.limited
    for limits in (ConnectionLimits(max_connections=10), ConnectionLimits(max_connections_per_ip=0),
                   ConnectionLimits(per_ip_overrides={"10.0.0.1": 5}),
                   ConnectionLimits(listener_max_connection_creation_rate={L: 3})):
        q.configure(limits)
        assert q.limited, limits
    q.configure(ConnectionLimits())
    assert not q.limited
