"""Client quotas in process: the entities' validation, DescribeClientQuotas' filter, which entity's quota a
request gets, Kafka's sampled rate and the throttle time it gives. Injected clock, no sockets.

Sources: ClientQuotaControlManager (metadata/src/main/java/org/apache/kafka/controller/), ClientQuotasImage
(metadata/src/main/java/org/apache/kafka/image/), DefaultQuotaCallback in core/src/main/scala/kafka/server/
ClientQuotaManager.scala, Rate / SampledStat (clients/.../common/metrics/stats/), QuotaUtils.throttleTime."""
from __future__ import annotations

import pytest

from kcoord.broker.quota import ClientQuotaManager, QuotaConfig, SampledRate, resolve
from kcoord.metadata.client_quotas import (
    CLIENT_ID,
    IP,
    PRODUCER_BYTE_RATE,
    USER,
    Alteration,
    ClientQuotaStore,
    QuotaRefused,
    validate_entity,
)


def entity(**pairs):
    return frozenset((k.replace("_", "-"), v) for k, v in pairs.items())


def test_the_rate_counts_at_least_samples_minus_one_windows():
    """Rate.windowSize: a young rate is spread over (samples - 1) windows, not the time since the first byte."""
    rate = SampledRate(11, 1000, now_ms=0)
    rate.record(10_000, 0)
    assert rate.rate(0) == pytest.approx(1000.0)          # 10,000 bytes over 10 s
    rate.record(10_000, 20_000)                           # the first sample expired (11 windows old)
    assert rate.rate(20_000) == pytest.approx(1000.0)


def test_samples_roll_over_and_old_ones_expire():
    rate = SampledRate(3, 1000, now_ms=0)
    for t in range(0, 3000, 100):
        rate.record(100, t)                               # 1,000 bytes a second for 3 s
    assert rate.rate(2999) == pytest.approx(3000 / 2.999)
    assert rate.rate(10_000) == 0.0


@pytest.mark.parametrize(("defined", "expected"), [
    ([entity(user="alice", client_id="app")], (("alice", "app"), 1.0)),
    ([entity(user="alice", client_id=None)], (("alice", "app"), 2.0)),
    ([entity(user="alice")], (("alice", ""), 3.0)),
    ([entity(user=None, client_id="app")], (("alice", "app"), 4.0)),
    ([entity(user=None, client_id=None)], (("alice", "app"), 5.0)),
    ([entity(user=None)], (("alice", ""), 6.0)),
    ([entity(client_id="app")], (("", "app"), 7.0)),
    ([entity(client_id=None)], (("", "app"), 8.0)),
])
def test_each_entity_alone_applies_with_the_sharing_kafka_gives_it(defined, expected):
    values = {entity(user="alice", client_id="app"): 1.0, entity(user="alice", client_id=None): 2.0,
              entity(user="alice"): 3.0, entity(user=None, client_id="app"): 4.0,
              entity(user=None, client_id=None): 5.0, entity(user=None): 6.0,
              entity(client_id="app"): 7.0, entity(client_id=None): 8.0}
    quotas = {e: {PRODUCER_BYTE_RATE: values[e]} for e in defined}
    assert resolve(quotas, PRODUCER_BYTE_RATE, "alice", "app") == expected


def test_the_most_specific_entity_wins_per_quota_key():
    quotas = {entity(client_id=None): {PRODUCER_BYTE_RATE: 8.0, "consumer_byte_rate": 80.0},
              entity(user="alice"): {PRODUCER_BYTE_RATE: 3.0}}
    assert resolve(quotas, PRODUCER_BYTE_RATE, "alice", "app") == (("alice", ""), 3.0)
    assert resolve(quotas, "consumer_byte_rate", "alice", "app") == (("", "app"), 80.0)
    assert resolve(quotas, PRODUCER_BYTE_RATE, "bob", "app") == (("", "app"), 8.0)
    assert resolve({}, PRODUCER_BYTE_RATE, "bob", "app") is None


def test_throttle_time_is_the_excess_over_the_quota_times_the_window():
    """QuotaUtils.throttleTime: (rate - quota) / quota * window size."""
    now = [0]
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, lambda: now[0], QuotaConfig(11, 1000))
    assert manager.record("u", "app", 10**9) == 0 and not manager.active   # no quota: nothing recorded
    manager.update({entity(client_id="app"): {PRODUCER_BYTE_RATE: 1000.0}})
    assert manager.active
    assert manager.record("u", "app", 10_000) == 0                        # exactly the quota over 10 s
    assert manager.record("u", "app", 5_000) == 5000                      # 1,500/s: 50% over, 10 s window
    assert manager.record("u", "other", 5_000) == 0                       # another client: no quota
    now[0] = 30_000
    assert manager.record("u", "app", 1) == 0                             # the window has passed
    manager.update({})
    assert not manager.active


def test_a_throttled_fetch_takes_its_bytes_back():
    manager = ClientQuotaManager("consumer_byte_rate", lambda: 0, QuotaConfig(11, 1000))
    manager.update({entity(client_id=None): {"consumer_byte_rate": 100.0}})
    assert manager.record("u", "c", 5000) > 0
    manager.unrecord("u", "c", 5000)
    assert manager.record("u", "c", 1000) == 0


@pytest.mark.parametrize(("pairs", "message"), [
    ([], "Invalid empty client quota entity"),
    ([(USER, "a"), (USER, "b")], "Invalid client quota entity, duplicate entity entry user"),
    ([("group", "g")], "Unhandled client quota entity type: group"),
    ([(CLIENT_ID, "")], "Empty client-id not supported"),
])
def test_bad_entities_are_refused_with_kafkas_messages(pairs, message):
    """ClientQuotaControlManager.validateEntity."""
    with pytest.raises(QuotaRefused, match=message):
        validate_entity(pairs)


@pytest.mark.parametrize(("ent", "key", "value", "message"), [
    (entity(user="a"), "producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
    (entity(user="a"), "producer_byte_rate", 1.5, "producer_byte_rate cannot be a fractional value."),
    (entity(user="a"), "bytes_per_fortnight", 1.0, "Invalid configuration key bytes_per_fortnight"),
    (entity(user="a"), "connection_creation_rate", 1.0, "Invalid configuration key connection_creation_rate"),
    (frozenset({(IP, "not-an-ip")}), "connection_creation_rate", 1.0, "not-an-ip is not a valid IP"),
    (frozenset({(IP, "10.0.0.1"), (USER, "a")}), "connection_creation_rate", 1.0, "Invalid quota entity combination"),
])
def test_bad_keys_and_values_refuse_that_entity_only(tmp_path, ent, key, value, message):
    """configKeysForEntityType / validateQuotaKeyValue; the other entity of the request is applied."""
    store = ClientQuotaStore(str(tmp_path))
    results = store.alter([Alteration(ent, [(key, value)]),
                           Alteration(entity(client_id="ok"), [("request_percentage", 12.5)])], False)
    assert results[0][2] == "INVALID_REQUEST" and message in results[0][1]
    assert results[1] == (entity(client_id="ok"), None, "NONE")
    assert ClientQuotaStore(str(tmp_path)).quotas() == {entity(client_id="ok"): {"request_percentage": 12.5}}


def test_alterations_are_durable_removals_drop_empty_entities_and_validate_only_changes_nothing(tmp_path):
    store = ClientQuotaStore(str(tmp_path))
    changes = []
    store.on_change = lambda: changes.append(1)
    store.alter([Alteration(entity(user=None), [(PRODUCER_BYTE_RATE, 1024.0)])], validate_only=True)
    assert store.quotas() == {} and changes == []
    store.alter([Alteration(entity(user=None), [(PRODUCER_BYTE_RATE, 1024.0), ("consumer_byte_rate", 2048.0)]),
                 Alteration(frozenset({(IP, "10.0.0.1")}), [("connection_creation_rate", 5.0)])], False)
    assert ClientQuotaStore(str(tmp_path)).quotas()[entity(user=None)] == {
        PRODUCER_BYTE_RATE: 1024.0, "consumer_byte_rate": 2048.0}
    store.alter([Alteration(entity(user=None), [(PRODUCER_BYTE_RATE, None), ("consumer_byte_rate", None)])], False)
    assert entity(user=None) not in ClientQuotaStore(str(tmp_path)).quotas()
    assert changes == [1, 1]
    dup = store.alter([Alteration(entity(user="a"), [(PRODUCER_BYTE_RATE, 1.0), (PRODUCER_BYTE_RATE, 2.0)])], False)
    assert dup[0][1].startswith("Duplicate quota key producer_byte_rate")


def test_describe_filters_as_kafkas_image_does(tmp_path):
    """ClientQuotasImage.describe / matches: exact, default and any-name components, strict or not."""
    store = ClientQuotaStore(str(tmp_path))
    store.alter([Alteration(e, [(PRODUCER_BYTE_RATE, 10.0)]) for e in (
        entity(user="alice"), entity(user="alice", client_id="app"), entity(user=None), entity(client_id="app"))],
        False)

    def names(components, strict=False):
        return sorted(sorted((t, n or "<default>") for t, n in e) for e, _ in store.describe(components, strict))

    assert names([(USER, 0, "alice")]) == [[("client-id", "app"), ("user", "alice")], [("user", "alice")]]
    assert names([(USER, 0, "alice")], strict=True) == [[("user", "alice")]]
    assert names([(USER, 1, None)]) == [[("user", "<default>")]]
    assert len(names([(USER, 2, None)])) == 3
    assert len(names([])) == 4 and names([], strict=True) == []
    for bad, text in [([(USER, 0, None)], "MATCH_TYPE_EXACT, but set match string to null"),
                      ([(USER, 1, "x")], "MATCH_TYPE_DEFAULT, but also specified a match string"),
                      ([(USER, 7, None)], "Unknown match type 7"),
                      ([(USER, 2, None), (USER, 1, None)], "cannot appear more than once"),
                      ([(IP, 2, None), (USER, 2, None)], "IP filter component should not be used")]:
        with pytest.raises(QuotaRefused, match=text):
            store.describe(bad, False)
    with pytest.raises(QuotaRefused) as exc:
        store.describe([("group", 2, None)], False)
    assert exc.value.code_name == "UNSUPPORTED_VERSION"


def test_a_fetch_asks_for_no_more_than_the_quota_allows_in_a_window():
    """ClientQuotaManager.getMaxValueInQuotaWindow: quota x (samples - 1) x window seconds."""
    manager = ClientQuotaManager("consumer_byte_rate", lambda: 0, QuotaConfig(11, 1000))
    assert manager.max_value_in_window("u", "c") is None
    manager.update({entity(client_id=None): {"consumer_byte_rate": 100.0}})
    assert manager.max_value_in_window("u", "c") == 1000.0


def test_request_time_throttles_are_bounded_by_one_window():
    """ClientRequestQuotaManager.throttleTime: boundedThrottleTime(e, maxThrottleTimeMs = one window)."""
    from kcoord.broker.quota import quota_managers

    _produce, _fetch, request = quota_managers(lambda: 0, QuotaConfig(11, 1000))
    request.update({entity(client_id=None): {"request_percentage": 1.0}})
    assert request.record("u", "c", 50.0) == 1000     # half a thread-second against 1%: far over, capped
