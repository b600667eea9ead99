"""Finalized features are the cluster's (issue #26): UpdateFeatures through one node is what ApiVersions
reports on every node, a node restarted on its data included (Kafka: FeatureLevelRecords in the metadata
log, written by FeatureControlManager.updateFeatures (metadata/src/main/java/org/apache/kafka/controller/
FeatureControlManager.java) and followed by every broker's metadata cache (core/src/main/scala/kafka/server/
metadata/KRaftMetadataCachePublisher.scala); here the `features` key, kcoord.broker.cluster_features)."""
from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from tests.cluster.replication_checks import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000)]

SAFE_DOWNGRADE, UPGRADE = 2, 1


def _finalized(cluster, via: int) -> tuple[int, dict[str, int]]:
    with KafkaWireClient.connect(cluster.nodes[via].bootstrap_servers, timeout=10) as wire:
        response = wire.request(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    return response.finalized_features_epoch, {f.name: f.max_version_level for f in response.finalized_features}


def _update(cluster, via: int, level: int, upgrade_type: int) -> ErrorCode:
    R = m.UpdateFeaturesRequest
    with KafkaWireClient.connect(cluster.nodes[via].bootstrap_servers, timeout=10) as wire:
        response = wire.request(R(timeout_ms=10_000, validate_only=False, feature_updates=[R.FeatureUpdateKey(
            feature="group.version", max_version_level=level, upgrade_type=upgrade_type)]), 2)
    return ErrorCode(response.error_code)


def test_a_feature_update_through_one_node_is_finalized_on_every_node(kafka_cluster):
    """group.version 1 -> 0 (SAFE_DOWNGRADE) through node 2: ApiVersions on node 2 at once, then on nodes 1
    and 3, lists no group.version at epoch 1; node 3 restarted still does; a refused update (UPGRADE to a
    lower level, INVALID_UPDATE_VERSION) changes nothing; 0 -> 1 through node 3 is epoch 2 everywhere."""
    cluster = kafka_cluster
    start = _finalized(cluster, 1)
    assert start[1].get("group.version") == 1
    assert all(_finalized(cluster, v) == start for v in (2, 3))
    assert _update(cluster, 2, 0, SAFE_DOWNGRADE) is ErrorCode.NONE
    downgraded = (start[0] + 1, {k: v for k, v in start[1].items() if k != "group.version"})
    assert _finalized(cluster, 2) == downgraded
    for via in (1, 3):
        wait_until(lambda v=via: _finalized(cluster, v) == downgraded, 10, f"node {via} following the update")
    cluster.kill(3)
    cluster.restart(3)
    assert _finalized(cluster, 3) == downgraded
    assert _update(cluster, 1, 0, UPGRADE) is ErrorCode.NONE  # no change asked: nothing to refuse
    assert _update(cluster, 1, 5, UPGRADE) is ErrorCode.INVALID_UPDATE_VERSION
    assert _update(cluster, 3, 1, UPGRADE) is ErrorCode.NONE
    for via in (1, 2, 3):
        wait_until(lambda v=via: _finalized(cluster, v) == (start[0] + 2, start[1]), 10, f"node {via} upgraded")
