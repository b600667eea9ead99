"""docker/docker-compose.yml: its structure, the commands it names, and the same scenario run as plain
processes (no Docker engine runs on our machines): one server, a producer, three kafka-python consumers
in one group — every message consumed exactly once across the group."""

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time

import pytest
import yaml

from tests.support.kcoord_server import KcoordServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPOSE = os.path.join(ROOT, "docker", "docker-compose.yml")
DOCKERFILE = os.path.join(ROOT, "docker", "Dockerfile")
CONSUMERS = ("consumer-1", "consumer-2", "consumer-3")


@pytest.fixture(scope="module")
def compose():
    with open(COMPOSE) as f:
        return yaml.safe_load(f)


def run_kcoord(*args, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "kcoord.tools", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_compose_structure(compose):
    services = compose["services"]
    assert set(services) == {"kcoord", "producer", *CONSUMERS, "analytics"}
    server = services["kcoord"]
    assert server["command"][:2] == ["kcoord", "serve"]
    assert "9092" in server["ports"][0]
    assert any(v.endswith(":/var/lib/kcoord/data") for v in server["volumes"])
    for name in ("producer", *CONSUMERS):
        assert services[name]["depends_on"]["kcoord"]["condition"] == "service_healthy"
        assert "kcoord:9092" in services[name]["command"]
    groups = {services[c]["command"][services[c]["command"].index("--group") + 1] for c in CONSUMERS}
    assert groups == {"demo-group"}, "the three consumers must share one group"
    assert services["analytics"]["profiles"] == ["analytics"], "analytics runs on demand only"
    assert services["analytics"]["build"]["target"] == "analytics"


def test_dockerfile_essentials():
    text = open(DOCKERFILE).read()
    assert "FROM python:3.11-slim" in text
    assert "USER kcoord" in text and "useradd" in text, "runs as a non-root user"
    assert "EXPOSE 9092" in text and "HEALTHCHECK" in text and "VOLUME" in text
    assert "AS analytics" in text


def test_every_command_compose_names_exists(compose):
    for name, service in compose["services"].items():
        command = service["command"]
        if name == "analytics":
            # The analytics image's ENTRYPOINT is `kcoord analyze`; the command is its arguments.
            argv = ["analyze", command[0], "--help"]
        else:
            assert command[0] == "kcoord", f"{name} must run the packaged kcoord command"
            argv = [*command[1:3], "--help"] if command[1] == "demo" else [command[1], "--help"]
        out = run_kcoord(*argv)
        assert out.returncode == 0, f"{name}: `kcoord {' '.join(argv)}` failed:\n{out.stderr}"
    # and the HEALTHCHECK's probe
    assert run_kcoord("demo", "ping", "--help").returncode == 0


def test_compose_file_validates_with_docker_compose():
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("docker-compose is not installed (make test installs it from Debian where it can)")
    out = subprocess.run([tool, "-f", COMPOSE, "config", "-q"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def _watch_stderr(proc, sink):
    for line in proc.stderr:
        if line.startswith("{"):
            sink.put(json.loads(line))


def wait_for_settled_group(events, partitions, members, timeout_s=60):
    """Until the latest assignment of each member is non-empty, disjoint and covers every partition."""
    latest = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            event = events.get(timeout=0.5)
        except queue.Empty:
            event = None
        if event and "assigned" in event:
            latest[event["client_id"]] = {p for _, p in event["assigned"]}
        owned = [latest.get(m, set()) for m in members]
        if all(owned) and sum(map(len, owned)) == partitions and set().union(*owned) == set(range(partitions)):
            return latest
    raise AssertionError(f"group did not settle: {latest}")


@pytest.mark.slow
def test_compose_scenario_as_processes(tmp_path):
    """Server + producer + 3 consumers in one group, as separate processes, exactly as compose wires them."""
    count = 600
    events = queue.Queue()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)]))
    base = [sys.executable, "-m", "kcoord.tools", "demo"]
    overrides = {"group.initial.rebalance.delay.ms": "500", "group.min.session.timeout.ms": "1000"}
    # a plain `kcoord serve` process on purpose: the scenario runs every part as compose does
    with KcoordServer(tmp_path / "data", overrides=overrides) as server:
        def demo(*args, **kw):
            return subprocess.run([*base, *args, "--bootstrap-server", server.bootstrap, "--wait", "30"],
                                  capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, **kw)

        # The topic exists before the consumers subscribe (the producer creates it; zero messages here).
        created = demo("produce", "--topic", "demo", "--partitions", "6", "--count", "0")
        assert created.returncode == 0, created.stderr
        consumers = [
            subprocess.Popen(
                [*base, "consume", "--bootstrap-server", server.bootstrap, "--topic", "demo",
                 "--group", "demo-group", "--client-id", cid, "--idle-timeout", "6", "--wait", "30",
                 "--session-timeout-ms", "6000"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
            for cid in CONSUMERS
        ]
        # stderr is the watchers' alone (communicate() would read it too, and close it under them)
        watchers = [threading.Thread(target=_watch_stderr, args=(proc, events), daemon=True) for proc in consumers]
        for watcher in watchers:
            watcher.start()
        try:
            assignment = wait_for_settled_group(events, 6, CONSUMERS)
            producer = demo("produce", "--topic", "demo", "--partitions", "6", "--count", str(count))
            assert producer.returncode == 0, producer.stderr
            outputs = []
            for proc, watcher in zip(consumers, watchers, strict=True):
                out = proc.stdout.read()   # to EOF: the consumer exits after its idle timeout
                assert proc.wait(timeout=120) == 0
                watcher.join(timeout=10)
                outputs.append([json.loads(line) for line in out.splitlines() if line.startswith("{")])
        finally:
            for proc in consumers:
                if proc.poll() is None:
                    proc.kill()

    seen = [(m["partition"], m["offset"]) for out in outputs for m in out]
    values = sorted(m["value"] for out in outputs for m in out)
    assert len(seen) == len(set(seen)) == count, "every message exactly once across the group"
    assert values == sorted(f"message-{i}" for i in range(count))
    for cid, out in zip(CONSUMERS, outputs, strict=True):
        assert {m["partition"] for m in out} <= assignment[cid], f"{cid} read outside its assignment"
