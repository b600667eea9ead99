"""ClusterClientQuotas on one LocalStore shared by two "nodes": an alteration through one is planned on the
stored values, written by compare-and-set and followed by the other's ClientQuotaStore and quota managers
(no sockets: tests/cluster/test_cluster_quotas_e2e.py runs it on etcd and TCP).

Kafka: ClientQuotaControlManager.alterClientQuotas (the rules, as in single-node mode) produces
ClientQuotaRecords that every broker's ClientQuotaMetadataManager applies to its quota managers;
ZooKeeper-era Kafka's ConfigEntityZNode layout (`/config/users/<u>/clients/<c>`, `<default>`) keys them."""
from __future__ import annotations

import asyncio

from kcoord.broker.cluster_quotas import PREFIX, ClusterClientQuotas, decode, entity_key, parse_entity_key
from kcoord.broker.quota import QuotaConfig, quota_managers
from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.client_quotas import PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, Alteration, ClientQuotaStore
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.store import Put
from kcoord.testkit.waiting import wait_until_async


def entity(**pairs) -> frozenset:
    return frozenset((k.replace("_", "-"), v) for k, v in pairs.items())


def _node(store, tmp_path, name: str) -> tuple[ClusterClientQuotas, ClientQuotaStore]:
    (tmp_path / name).mkdir()
    quotas = ClientQuotaStore(str(tmp_path / name), read_file=False)
    return ClusterClientQuotas(store, quotas), quotas



def test_keys_follow_the_zookeeper_era_layout_and_round_trip():
    cases = {
        entity(user="alice"): "users/alice",
        entity(user=None): "users/<default>",
        entity(client_id="a/b c"): "clients/a%2Fb%20c",
        entity(user="alice", client_id=None): "users/alice/clients/<default>",
        entity(ip="10.0.0.1"): "ips/10.0.0.1",
    }
    for e, key in cases.items():
        assert entity_key(e) == key
        assert parse_entity_key(key) == e
    assert entity_key(entity(user="u", ip="10.0.0.1")) is None  # refused by the rules before any write
    assert parse_entity_key("users/a/topics/b") is None


async def test_an_alteration_through_one_node_is_enforced_by_another(tmp_path):
    store = LocalStore(timer=ManualClock().timers)
    one, quotas1 = _node(store, tmp_path, "one")
    two, quotas2 = _node(store, tmp_path, "two")
    clock = ManualClock()
    produce, _fetch, request = quota_managers(clock.now_ms, QuotaConfig(2, 1000))
    quotas2.on_change = lambda: (produce.update(quotas2.quotas()), request.update(quotas2.quotas()))
    await one.start()
    await two.start()
    assert not produce.active

    results = await one.alter([Alteration(entity(client_id="app"), [(PRODUCER_BYTE_RATE, 1000.0)]),
                               Alteration(entity(user="u", ip="10.0.0.1"), [(PRODUCER_BYTE_RATE, 1.0)])], False)
    assert [(code, message is None) for _e, message, code in results] == [("NONE", True), ("INVALID_REQUEST", False)]
    assert quotas1.quotas() == {entity(client_id="app"): {PRODUCER_BYTE_RATE: 1000.0}}  # read-your-writes
    await wait_until_async(lambda: produce.active, 5, "the other node following")
    assert produce.record("", "app", 10_000) > 0       # node two throttles what node one set
    assert produce.record("", "other", 10_000) == 0
    assert not (tmp_path / "one" / "kcoord-client-quotas.json").exists()  # nothing of it in the node's files

    # a change through node two starts from the stored value: node one's key is kept
    await two.alter([Alteration(entity(client_id="app"), [(REQUEST_PERCENTAGE, 50.0)])], False)
    await wait_until_async(lambda: quotas1.quotas() == {entity(client_id="app"): {PRODUCER_BYTE_RATE: 1000.0,
                                                                         REQUEST_PERCENTAGE: 50.0}}, 5, "the other node following")
    assert request.active
    # removing every key removes the entity's key from the store
    await one.alter([Alteration(entity(client_id="app"), [(PRODUCER_BYTE_RATE, None), (REQUEST_PERCENTAGE, None)])],
                    False)
    await wait_until_async(lambda: not produce.active and quotas2.quotas() == {}, 5, "the other node following")
    assert (await store.range(PREFIX)).kvs == ()
    await one.close()
    await two.close()


async def test_validate_only_and_refused_alterations_write_nothing(tmp_path):
    store = LocalStore(timer=ManualClock().timers)
    node, quotas = _node(store, tmp_path, "n")
    await node.start()
    results = await node.alter([Alteration(entity(user=None), [(PRODUCER_BYTE_RATE, 5.0)])], True)
    assert [code for _e, _m, code in results] == ["NONE"]
    results = await node.alter([Alteration(entity(ip="nope"), [("connection_creation_rate", 5.0)])], False)
    assert [(code, message) for _e, message, code in results] == [
        ("INVALID_REQUEST", "nope is not a valid IP or resolvable host.")]
    assert (await store.range(PREFIX)).kvs == ()
    assert quotas.quotas() == {}
    await node.close()


class InterleavingStore(LocalStore):
    """Yields before every txn, so two nodes' read-plan-write steps interleave; counts refused writes."""

    refused = 0

    async def txn(self, compares, on_success, on_failure=()):
        await asyncio.sleep(0)
        result = await super().txn(compares, on_success, on_failure)
        self.refused += not result.succeeded
        return result


async def test_concurrent_alterations_of_one_entity_through_two_nodes_both_land(tmp_path):
    """Both read the entity before either writes; each writes on the condition it did not change, so the
    loser is refused, plans again on the winner's value, and neither key is lost."""
    store = InterleavingStore(timer=ManualClock().timers)
    one, quotas1 = _node(store, tmp_path, "one")
    two, _quotas2 = _node(store, tmp_path, "two")
    await one.start()
    await two.start()
    target = entity(user="u", client_id="c")
    await asyncio.gather(one.alter([Alteration(target, [(PRODUCER_BYTE_RATE, 100.0)])], False),
                         two.alter([Alteration(target, [(REQUEST_PERCENTAGE, 10.0)])], False))
    await wait_until_async(lambda: quotas1.quotas() == {target: {PRODUCER_BYTE_RATE: 100.0, REQUEST_PERCENTAGE: 10.0}}, 5, "the other node following")
    assert store.refused == 1
    await one.close()
    await two.close()


async def test_a_bad_stored_value_is_skipped_not_fatal(tmp_path):
    store = LocalStore(timer=ManualClock().timers)
    await store.txn([], [Put(PREFIX + "users/bad", b"{not json"), Put(PREFIX + "nonsense", b"{}"),
                         Put(PREFIX + "ips/<default>", b'{"connection_creation_rate": 3}')])
    node, quotas = _node(store, tmp_path, "n")
    await node.start()
    assert quotas.quotas() == {entity(ip=None): {"connection_creation_rate": 3.0}}
    # an alteration of the entity whose value is bad replaces it
    await node.alter([Alteration(entity(user="bad"), [(PRODUCER_BYTE_RATE, 7.0)])], False)
    assert quotas.quotas()[entity(user="bad")] == {PRODUCER_BYTE_RATE: 7.0}
    assert decode({"clients/x": b"[]"}) == {}
    await node.close()
