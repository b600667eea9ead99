"""CLIENT_METRICS resources in cluster mode on one LocalStore shared by two "nodes": a subscription defined
through one is served by the other's telemetry (no sockets: tests/cluster/test_cluster_quotas_e2e.py runs
it on etcd and TCP).

Kafka: a CLIENT_METRICS ConfigRecord in the metadata log reaches every broker's ClientMetricsManager
(core/.../server/metadata/DynamicConfigPublisher.scala: onMetadataUpdate -> ClientMetricsManager.updateSubscription); ZooKeeper-era Kafka kept the resource
at `/config/client-metrics/<name>`."""
from __future__ import annotations

import uuid

from kcoord.broker.client_telemetry import ClientInfo, ClientTelemetry
from kcoord.broker.cluster_configs import CLIENT_METRICS, ClusterConfigResources
from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.client_metrics_configs import ClientMetricsConfigStore
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.store import Put
from kcoord.protocol.errors import ErrorCode
from kcoord.testkit.waiting import wait_until_async

CLIENT = ClientInfo("app-1", "librdkafka", "2.16.1", "127.0.0.1", 50000)


def _node(store, tmp_path, name: str) -> tuple[ClusterConfigResources, ClientMetricsConfigStore, ClientTelemetry]:
    (tmp_path / name).mkdir()
    configs = ClientMetricsConfigStore(str(tmp_path / name), read_file=False)
    telemetry = ClientTelemetry(lambda: 1_000_000, configs.subscriptions, enabled=False, max_bytes=1 << 20,
                                default_interval_ms=1000)
    configs.on_change = telemetry.subscriptions_changed
    return ClusterConfigResources(store, CLIENT_METRICS, configs.replace_all), configs, telemetry



async def test_a_subscription_defined_through_one_node_is_served_by_another(tmp_path):
    store = LocalStore(timer=ManualClock().timers)
    one, configs1, _telemetry1 = _node(store, tmp_path, "one")
    two, configs2, telemetry2 = _node(store, tmp_path, "two")
    await one.start()
    await two.start()
    assert not telemetry2.enabled  # off by default: no property, no resource

    await one.alter("producers/all", {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000",
                                      "match": "client_id=app-.*"})
    assert configs1.names() == ["producers/all"]  # read-your-writes
    await wait_until_async(lambda: telemetry2.enabled, 5, "the other node following")
    answer = telemetry2.get_subscriptions(uuid.UUID(int=0), CLIENT)
    assert (answer.error, answer.push_interval_ms, answer.requested_metrics) == (
        ErrorCode.NONE, 2000, ("org.apache.kafka.producer.",))
    assert not (tmp_path / "one" / "kcoord-client-metrics.json").exists()  # nothing of it in the node's files

    await two.alter("producers/all", {})  # no configs: the resource is gone, everywhere
    await wait_until_async(lambda: configs1.names() == [] and not telemetry2.enabled, 5, "the other node following")
    await one.close()
    await two.close()


async def test_a_stored_subscription_that_does_not_validate_is_skipped(tmp_path):
    store = LocalStore(timer=ManualClock().timers)
    await store.txn([], [Put(CLIENT_METRICS + "bad", b'{"interval.ms": "5"}'),
                         Put(CLIENT_METRICS + "good", b'{"metrics": "*"}')])
    node, configs, telemetry = _node(store, tmp_path, "n")
    await node.start()
    assert configs.names() == ["good"]
    assert [s.name for s in configs.subscriptions()] == ["good"] and telemetry.enabled
    await node.close()
