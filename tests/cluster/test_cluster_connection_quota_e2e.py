"""connection_creation_rate is the cluster's (3 real nodes on a real etcd): an ip quota altered through node 1
is enforced by node 3's acceptor, and its removal through node 2 lifts it there.

Kafka: ClientQuotaControlManager.alterClientQuotas writes a ClientQuotaRecord for the ip entity; every broker's
ClientQuotaMetadataManager.handleIpQuota (core/src/main/scala/kafka/server/metadata/
ClientQuotaMetadataManager.scala) hands it to its SocketServer's ConnectionQuotas.updateIpConnectionRateQuota,
and the Acceptor throttles new connections from that ip (SocketServer.scala: Acceptor.accept,
recordIpConnectionMaybeThrottle). The burst comes from 127.0.0.9, so nothing else (the nodes' own connections
to each other, from 127.0.0.1-3) is under the quota."""
from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.testkit.waiting import wait_until
from tests.broker.quota.test_connection_quotas_e2e import burst

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180), pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000)]
SOURCE = "127.0.0.9"


def _alter(cluster, via: int, rate: float | None) -> None:
    R = m.AlterClientQuotasRequest
    request = R(validate_only=False, entries=[R.EntryData(
        entity=[R.EntityData(entity_type="ip", entity_name=SOURCE)],
        ops=[R.OpData(key="connection_creation_rate", value=rate or 0.0, remove=rate is None)])])
    with KafkaWireClient.connect(cluster.nodes[via].bootstrap_servers, timeout=10) as wire:
        response = wire.request(request, 1)
    assert [(e.error_code, e.error_message) for e in response.entries] == [(ErrorCode.NONE, None)]


def test_an_ip_quota_altered_through_one_node_is_enforced_by_another(kafka_cluster):
    node = kafka_cluster.nodes[3]
    assert burst(node.port, 12, node.host, SOURCE) == ["answered"] * 12  # no quota yet
    _alter(kafka_cluster, 1, 1.0)

    def throttled() -> list[str] | None:
        outcomes = burst(node.port, 12, node.host, SOURCE)
        return outcomes if "closed" in outcomes else None

    outcomes = wait_until(throttled, 30, "node 3 to throttle connections from the ip")
    # once the rate is over the quota every later connection of the burst is held and closed, unanswered
    closed_from = outcomes.index("closed")
    assert outcomes[closed_from:] == ["closed"] * (len(outcomes) - closed_from)

    _alter(kafka_cluster, 2, None)
    wait_until(lambda: burst(node.port, 12, node.host, SOURCE) == ["answered"] * 12, 30,
               "node 3 to answer every connection from the ip again")
