"""docker/docker-compose.cluster.yml: its structure, and its services run as plain processes (no Docker
engine runs on our machines, as for tests/test_compose_scenario.py): each service's own command, with
the compose network's names and ports mapped to loopback addresses and free ports and its volumes to
directories. The cluster they form: every node registered, an RF 3 topic with a full ISR, acks=all
writes read back through each node's published (EXTERNAL) listener, replicas identical."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from kcoord.testkit.broker_process import READY
from kcoord.testkit.etcd import etcd_binary, free_port
from kcoord.testkit.launcher import child_env
from tests.cluster.replication_checks import check_identical_replicas, read_all

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "docker-compose.cluster.yml"
NODES = ("kcoord1", "kcoord2", "kcoord3")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _overrides(command: list[str]) -> dict[str, str]:
    values = [command[i + 1] for i, arg in enumerate(command) if arg == "--override"]
    return dict(v.split("=", 1) for v in values)


def test_compose_cluster_structure(compose):
    services = compose["services"]
    assert set(services) == {"etcd", *NODES}
    props = {name: _overrides(services[name]["command"]) for name in NODES}
    assert sorted(p["node.id"] for p in props.values()) == ["1", "2", "3"]
    assert {p["kcoord.etcd.connect"] for p in props.values()} == {"etcd:2379/kcoord"}, "one cluster, one prefix"
    for name in NODES:
        service = services[name]
        assert service["command"][:2] == ["kcoord", "serve"]
        assert service["depends_on"]["etcd"]["condition"] == "service_healthy"
        first = props[name]["advertised.listeners"].split(",")[0]
        assert first == f"INTERNAL://{name}:9092", "nodes replicate from the first advertised listener"
        published = service["ports"][0].rsplit(":", 1)[1]
        assert f"EXTERNAL://127.0.0.1:{published}" in props[name]["advertised.listeners"]
    volumes = [services[n]["volumes"][0].split(":")[0] for n in NODES]
    assert len(set(volumes)) == 3, "each node its own data volume"
    assert "--advertise-client-urls=http://etcd:2379" in services["etcd"]["command"]


def test_compose_cluster_file_validates_with_docker_compose():
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("docker-compose is not installed (make test installs it from Debian where it can)")
    out = subprocess.run([tool, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


class ComposeAsProcesses:
    """The compose file's services as processes: service names and ports become loopback addresses
    (node N on 127.0.0.(N+1), etcd on 127.0.0.1) and free ports, named volumes become directories."""

    def __init__(self, compose: dict, workdir: pathlib.Path) -> None:
        self.services = compose["services"]
        self.workdir = workdir
        etcd_client, etcd_peer = free_port(), free_port()
        shared = {"etcd:2379": f"127.0.0.1:{etcd_client}", "etcd:2380": f"127.0.0.1:{etcd_peer}"}
        self.external: dict[str, str] = {}
        self.mapping: dict[str, dict[str, str]] = {"etcd": {
            **shared, "0.0.0.0:2379": f"127.0.0.1:{etcd_client}", "0.0.0.0:2380": f"127.0.0.1:{etcd_peer}",
            "127.0.0.1:2379": f"127.0.0.1:{etcd_client}"}}
        for i, name in enumerate(NODES, start=1):
            host = f"127.0.0.{i + 1}"
            internal, external = f"{host}:{free_port(host)}", f"{host}:{free_port(host)}"
            published = self.services[name]["ports"][0].rsplit(":", 1)[1]
            self.external[name] = external
            self.mapping[name] = {**shared, "0.0.0.0:9092": internal, f"{name}:9092": internal,
                                  f"0.0.0.0:{published}": external, f"127.0.0.1:{published}": external}
        self.processes: dict[str, subprocess.Popen] = {}

    def argv(self, name: str) -> list[str]:
        service = self.services[name]
        out = []
        for arg in service["command"]:
            for compose_address, local in self.mapping[name].items():
                arg = arg.replace(compose_address, local)
            for volume in service.get("volumes", ()):
                source, target = volume.split(":")[:2]
                arg = arg.replace(target, str(self.workdir / source))
            out.append(arg)
        if name == "etcd":
            binary = etcd_binary()
            assert binary is not None
            return [binary, *out[1:]]
        assert out[0] == "kcoord"
        return [sys.executable, "-m", "kcoord.tools", *out[1:]]

    def start(self, name: str) -> None:
        with open(self.workdir / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(self.argv(name), stdout=log, stderr=subprocess.STDOUT,
                                                    stdin=subprocess.DEVNULL, cwd=self.workdir,
                                                    env=child_env({}))

    def wait_ready(self, name: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not READY.search((self.workdir / f"{name}.log").read_text(errors="replace")):
            assert self.processes[name].poll() is None, f"{name} exited: {self.log(name)}"
            assert time.monotonic() < deadline, f"{name} not ready in {timeout} s: {self.log(name)}"
            time.sleep(0.05)

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        for name, proc in self.processes.items():
            if name != "etcd" and proc.poll() is None:
                proc.terminate()  # SIGTERM: the controlled shutdown compose's `down` sends
        for name, proc in self.processes.items():
            if name != "etcd":
                try:
                    proc.wait(40)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if "etcd" in self.processes:
            self.processes["etcd"].kill()
            self.processes["etcd"].wait()


def _wait_etcd(address: str, timeout: float = 20.0) -> None:
    import json
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{address}/health", timeout=1) as reply:
                if json.load(reply).get("health") == "true":
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "etcd did not answer /health"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_compose_cluster_as_processes(compose, tmp_path):
    """etcd and the three nodes from their compose commands; through each node's EXTERNAL listener:
    Metadata lists the 3 brokers at their EXTERNAL addresses, an RF 3 topic gets a full ISR, acks=all
    writes are all read back, and the three replicas hold identical data."""
    if etcd_binary() is None:
        pytest.skip("etcd is not installed (Debian: apt-get install etcd-server; make test does it)")
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    run = ComposeAsProcesses(compose, tmp_path)
    try:
        run.start("etcd")
        _wait_etcd(run.mapping["etcd"]["etcd:2379"])
        for name in NODES:
            run.start(name)
        for name in NODES:
            run.wait_ready(name)
        bootstrap = ",".join(run.external[n] for n in NODES)
        for name in NODES:
            deadline = time.monotonic() + 30
            while True:
                brokers = _brokers(run.external[name])
                if len(brokers) == 3:
                    break
                assert time.monotonic() < deadline, f"{name} sees brokers {brokers}"
                time.sleep(0.2)
            assert sorted(brokers.values()) == sorted(run.external.values()), "clients get EXTERNAL addresses"
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        admin.create_topics([NewTopic("compose", 3, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.close()
        deadline = time.monotonic() + 30
        while not all(len(isr) == 3 for isr in _isrs(run.external["kcoord1"], "compose").values()):
            assert time.monotonic() < deadline, f"ISR {_isrs(run.external['kcoord1'], 'compose')}"
            time.sleep(0.2)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
        futures = [producer.send("compose", f"v{i}".encode()) for i in range(300)]
        acked = [f.get(timeout=30) for f in futures]
        producer.close()
        for name in NODES:
            records, ends = read_all(run.external[name], "compose", 3)
            assert sorted(v for _p, _o, v in records) == sorted(f"v{i}" for i in range(300)), name
            assert sum(ends.values()) == len(acked)
        for p in range(3):
            dirs = {i: tmp_path / f"{n}-data" for i, n in enumerate(NODES, start=1)}
            assert check_identical_replicas(dirs, "compose", p, ends[p]) == []
    finally:
        run.stop()
    for name in NODES:  # SIGTERM: a controlled shutdown, exit 0
        assert run.processes[name].returncode == 0, f"{name} exit {run.processes[name].returncode}: {run.log(name)}"


def _brokers(address: str) -> dict[int, str]:
    from kcoord.protocol import messages as m
    from kcoord.protocol.client import KafkaWireClient

    try:
        with KafkaWireClient.connect(address, timeout=5) as client:
            response = client.request(m.MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    except OSError:
        return {}
    return {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}


def _isrs(address: str, topic: str) -> dict[int, list[int]]:
    from kcoord.protocol import messages as m
    from kcoord.protocol.client import KafkaWireClient

    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                                allow_auto_topic_creation=False)
    with KafkaWireClient.connect(address, timeout=5) as client:
        response = client.request(request, 12)
    return {p.partition_index: list(p.isr_nodes) for t in response.topics for p in t.partitions}

