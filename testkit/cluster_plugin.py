"""pytest plugin (entry point `pytest11: kcoord_cluster`): a real kcoord cluster for your tests.

    def test_failover(kafka_cluster):
        admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
        ...
        kafka_cluster.kill(kafka_cluster.leader_of("events", 0))   # SIGKILL the leader
        kafka_cluster.restart(2)                                     # back on its data

    @pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000, overrides={"num.partitions": "6"})
    def test_with_settings(kafka_cluster): ...

    @pytest.mark.kcoord_cluster(links=True, session_timeout_ms=2000)
    def test_partition(kafka_cluster):
        kafka_cluster.cut(2)                       # node 2 loses etcd and the other nodes (blackhole)
        kafka_cluster.cut(2, from_etcd=False, from_nodes={3}, mode="reset")   # one pair, connections reset
        kafka_cluster.heal(2)

`kafka_cluster` is a kcoord.testkit.cluster.KafkaCluster: one etcd (Debian's etcd-server) and N
`kcoord serve` processes on loopback, started fresh for each test and stopped after it. Without etcd
installed the test is skipped. `pause(n)` / `resume(n)` are SIGSTOP / SIGCONT; with `links=True` every
node's etcd link and its replication links go through proxies (kcoord.testkit.links) that `cut(n,
from_etcd=True, from_nodes=True, mode="blackhole"|"reset")` and `heal(n)` break and mend, while clients
keep reaching every node. When a test fails, the tail of every node's log is added to its report.
"""
from __future__ import annotations

import pytest

LOG_LINES_ON_FAILURE = 100
_CLUSTERS = pytest.StashKey[list]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kcoord_cluster(nodes=3, session_timeout_ms=9000, overrides=None, links=False): the kafka_cluster's shape")


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, tmp_path):
    """A fresh cluster (etcd + N kcoord nodes) for this test."""
    from kcoord.testkit.cluster import KafkaCluster
    from kcoord.testkit.etcd import INSTALL_HINT, etcd_binary

    if etcd_binary() is None:
        pytest.skip(INSTALL_HINT)
    marker = request.node.get_closest_marker("kcoord_cluster")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    cluster = KafkaCluster(tmp_path, nodes=kwargs.get("nodes", 3), overrides=kwargs.get("overrides"),
                           session_timeout_ms=kwargs.get("session_timeout_ms", 9000), links=kwargs.get("links", False))
    request.node.stash[_CLUSTERS] = [cluster]
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and report.when in ("setup", "call"):
        for cluster in item.stash.get(_CLUSTERS, ()):
            for node_id, node in cluster.nodes.items():
                tail = node.log_text().splitlines()[-LOG_LINES_ON_FAILURE:]
                report.sections.append((f"kcoord node {node_id} log (last {len(tail)} lines of {node.log_path})",
                                        "\n".join(tail)))
    return report
