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

    @pytest.mark.kcoord_shared_cluster
    def test_metadata(kafka_cluster): ...

A test marked `kcoord_shared_cluster` leaves the cluster as it found it (no fault, no cluster-wide setting
changed, topics and groups of names its own): it runs on a cluster its module's other such tests of the
same shape share, started once. A cluster a fault was injected into (kill, restart, pause, cut), or whose
test failed, is stopped after the test rather than shared.
"""
from __future__ import annotations

import pytest

LOG_LINES_ON_FAILURE = 100
_CLUSTERS = pytest.StashKey[list]()
_FAILED = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kcoord_cluster(nodes=3, session_timeout_ms=9000, overrides=None, links=False): the kafka_cluster's shape")
    config.addinivalue_line(
        "markers", "kcoord_shared_cluster: the test leaves its kafka_cluster as it found it; it shares one with "
                   "its module's other such tests")


@pytest.fixture(scope="module")
def _kcoord_shared_clusters():
    """The module's shared clusters by shape, stopped when the module is done."""
    clusters: dict = {}
    yield clusters
    for cluster in clusters.values():
        cluster.stop()


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A fresh cluster (etcd + N kcoord nodes) for this test, or the module's shared one."""
    from kcoord.testkit.cluster import KafkaCluster
    from kcoord.testkit.etcd import INSTALL_HINT, etcd_binary

    if etcd_binary() is None:
        pytest.skip(INSTALL_HINT)
    marker = request.node.get_closest_marker("kcoord_cluster")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    shared: dict[str, KafkaCluster] | None = None
    if request.node.get_closest_marker("kcoord_shared_cluster") is not None:
        shared = request.getfixturevalue("_kcoord_shared_clusters")
    shape = repr(sorted(kwargs.items()))
    cluster = shared.pop(shape, None) if shared is not None else None
    fresh = cluster is None
    if cluster is None:
        cluster = KafkaCluster(tmp_path_factory.mktemp("cluster"), nodes=kwargs.get("nodes", 3),
                               overrides=kwargs.get("overrides"), session_timeout_ms=kwargs.get("session_timeout_ms", 9000),
                               links=kwargs.get("links", False))
    request.node.stash[_CLUSTERS] = [cluster]
    if fresh:
        cluster.start()
    yield cluster
    as_found = not cluster.disturbed and all(node.running for node in cluster.nodes.values())
    if shared is not None and as_found and not request.node.stash.get(_FAILED, False):
        shared[shape] = cluster
    else:
        cluster.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and report.when in ("setup", "call"):
        item.stash[_FAILED] = True
        for cluster in item.stash.get(_CLUSTERS, ()):
            for node_id, node in cluster.nodes.items():
                tail = node.log_text().splitlines()[-LOG_LINES_ON_FAILURE:]
                report.sections.append((f"kcoord node {node_id} log (last {len(tail)} lines of {node.log_path})",
                                        "\n".join(tail)))
    return report
