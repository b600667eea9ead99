"""The admin endpoint's faults over real TCP: a subprocess server with kcoord.admin.listener, requests
sent with our wire client, faults installed with kcoord.broker.admin_client (what `kcoord faults` uses).

Error answers follow where Kafka's responses carry errors: Heartbeat's top-level ErrorCode
(HeartbeatResponse.json), OffsetCommit's per-partition ErrorCode (OffsetCommitResponse.json)."""
from __future__ import annotations

import json
import socket
import time
import urllib.request

import pytest

from kcoord.broker.admin_client import AdminClient, AdminRequestError
from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient, WireError
from kcoord.protocol.errors import ErrorCode
from kcoord.testkit.pytest_plugin import start_broker

ADMIN = {"kcoord.admin.listener": "http://127.0.0.1:0", "metrics.port": "0"}


@pytest.fixture
def server(kcoord_server_factory):
    return kcoord_server_factory(ADMIN)


@pytest.fixture
def admin(server):
    return AdminClient(f"http://127.0.0.1:{server.admin_port}")


def heartbeat(client, group="g", member="m-1"):
    return client.request(m.HeartbeatRequest(group_id=group, member_id=member, generation_id=1), 4).error_code


def test_off_by_default(tmp_path):
    bare = start_broker(tmp_path, admin=False, test_settings=False)  # no property set, as a bare `kcoord serve`
    try:
        assert bare.admin_port is None
        assert "admin on port" not in bare.log_text()
    finally:
        bare.stop()


def test_error_fault_fires_after_n_for_count_then_stops(server, admin):
    fault = admin.faults.add("Heartbeat", error="REBALANCE_IN_PROGRESS", group_id="g", after=1, count=2)
    assert fault["id"] == 1 and fault["fired"] == 0
    with KafkaWireClient.connect(server.bootstrap, client_id="app-1") as client:
        other_group = heartbeat(client, group="other")
        got = [heartbeat(client) for _ in range(4)]
    unknown, rip = ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS
    assert other_group == unknown  # another group is not matched
    assert got == [unknown, rip, rip, unknown]
    listed = admin.faults.get(1)
    assert (listed["matched"], listed["fired"], listed["exhausted"]) == (3, 2, True)
    line = server.wait_for_log(r"fault 1 fired \(REBALANCE_IN_PROGRESS, 2 of 2\): Heartbeat v4 .*group_id=g.*")
    assert "client_id='app-1'" in line.group(0) and "member_id=m-1" in line.group(0)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics").read().decode()
    assert 'kcoord_faults_fired_total{action="error",api="Heartbeat",fault="1"} 2' in metrics


def test_offset_commit_error_is_per_partition(server, admin):
    admin.faults.add("OffsetCommit", error="NOT_COORDINATOR", topic="t", count=1)
    topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
    part = m.OffsetCommitRequest.OffsetCommitRequestPartition
    req = m.OffsetCommitRequest(group_id="simple", generation_id_or_member_epoch=-1, member_id="", topics=[
        topic(name="t", partitions=[part(partition_index=0, committed_offset=5),
                                    part(partition_index=1, committed_offset=6)])])
    with KafkaWireClient.connect(server.bootstrap) as client:
        failed = client.request(req, 8)
        fetched = client.request(m.OffsetFetchRequest(group_id="simple", topics=None), 7)
    assert [(p.partition_index, p.error_code) for t in failed.topics for p in t.partitions] == [
        (0, ErrorCode.NOT_COORDINATOR), (1, ErrorCode.NOT_COORDINATOR)]
    assert fetched.topics == []  # the failed commit stored nothing


def test_delay_then_serve(server, admin):
    admin.faults.add("Metadata", action="delay", delay_ms=400, count=1)
    with KafkaWireClient.connect(server.bootstrap) as client:
        started = time.monotonic()
        resp = client.request(m.MetadataRequest(topics=[]), 9)
        elapsed = time.monotonic() - started
    assert resp.brokers and elapsed >= 0.4  # answered normally, and not before the delay


def test_close_instead_of_answering(server, admin):
    admin.faults.add("FindCoordinator", action="close", count=1)
    with KafkaWireClient.connect(server.bootstrap) as client:
        with pytest.raises((WireError, ConnectionError)):
            client.request(m.FindCoordinatorRequest(key="g", key_type=0), 3)
    with KafkaWireClient.connect(server.bootstrap) as client:  # one shot: the next connection is served
        assert client.request(m.FindCoordinatorRequest(key="g", key_type=0), 3).error_code == 0
    server.wait_for_log(r"closing connection .*: fault 1: close instead of answering FindCoordinator v3")


def test_list_remove_clear(server, admin):
    admin.faults.add("Heartbeat", error="NOT_COORDINATOR")
    admin.faults.add("SyncGroup", action="delay", delay_ms=50, probability=0.5, seed=3)
    assert [(f["id"], f["api"], f["action"]) for f in admin.faults.list()] == [
        (1, "Heartbeat", "error"), (2, "SyncGroup", "delay")]
    admin.faults.remove(1)
    with pytest.raises(AdminRequestError) as missing:
        admin.faults.remove(1)
    assert missing.value.status == 404
    assert admin.faults.clear() == 1 and admin.faults.list() == []
    with KafkaWireClient.connect(server.bootstrap) as client:
        assert heartbeat(client) == ErrorCode.UNKNOWN_MEMBER_ID


def raw_http(port, method, path, body: bytes):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


@pytest.mark.parametrize("method, path, body, status, message", [
    ("POST", "/faults", b"{not json", 400, "not valid JSON"),
    ("POST", "/faults", b'{"api": "Heartbeet", "error": "NOT_COORDINATOR"}', 400, "unknown API 'Heartbeet'"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": "NOT_COORDINATOR", "count": -1}', 400, "count"),
    # a list is all or nothing: the first, good, fault is not added either
    ("POST", "/faults", b'[{"api": "Heartbeat", "error": 15}, {"api": "Nope", "error": 15}]', 400, "unknown API"),
    ("PUT", "/faults", b"", 405, "use GET, POST or DELETE"),
    ("DELETE", "/faults/abc", b"", 400, "must be a number"),
    ("GET", "/nothing-here", b"", 404, "no such endpoint"),
    ("POST", "/groups/expire-member", b'{"group_id": "g"}', 400, "member_id"),
    ("POST", "/groups/expire-member", b'{"group_id": "g", "member_id": "nobody"}', 404, "no member"),
    ("POST", "/groups/fire-timers", b"[]", 400, "group_id"),
    ("POST", "/offsets/run-retention", b'{"now": 1}', 400, "no parameters"),
])
def test_bad_input_is_a_clear_4xx_and_changes_nothing(server, admin, method, path, body, status, message):
    admin.faults.add("Heartbeat", error="NOT_COORDINATOR", group_id="keep")
    before = admin.faults.list()
    got_status, payload = raw_http(server.admin_port, method, path, body)
    assert got_status == status and message in payload["error"]
    assert admin.faults.list() == before


def kcoord_cli(*args, admin_port=None):
    import os
    import subprocess
    import sys

    from tests.support.kcoord_server import ROOT

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)]))
    if admin_port is not None:
        env["KCOORD_ADMIN"] = f"http://127.0.0.1:{admin_port}"
    return subprocess.run([sys.executable, "-m", "kcoord.tools", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_cli_add_list_clear(server, admin):
    port = server.admin_port
    added = kcoord_cli("faults", "add", "--api", "Heartbeat", "--error", "REBALANCE_IN_PROGRESS", "--group-id",
                       "g", "--count", "3", admin_port=port)
    assert added.returncode == 0 and added.stdout == "fault 1 added\n"
    added = kcoord_cli("faults", "--admin", f"http://127.0.0.1:{port}", "add", "--json",
                       '{"api": "SyncGroup", "action": "delay", "delay_ms": 1500, "count": 1}')
    assert added.returncode == 0 and added.stdout == "fault 2 added\n"
    with KafkaWireClient.connect(server.bootstrap) as client:
        assert heartbeat(client) == ErrorCode.REBALANCE_IN_PROGRESS
    listed = kcoord_cli("faults", "list", admin_port=port).stdout.splitlines()
    assert listed[0].split() == ["ID", "API", "ACTION", "MATCH", "AFTER", "COUNT", "PROBABILITY", "MATCHED", "FIRED"]
    assert listed[1].split() == ["1", "Heartbeat", "REBALANCE_IN_PROGRESS", "group_id=g", "0", "3", "1", "1", "1"]
    assert listed[2].split() == ["2", "SyncGroup", "delay", "1500ms", "*", "0", "1", "1", "0", "0"]
    assert kcoord_cli("faults", "clear", admin_port=port).stdout == "2 faults cleared\n"
    assert admin.faults.list() == []


def test_cli_bad_input_exits_1_and_says_why(server, admin):
    bad = kcoord_cli("faults", "add", "--api", "Heartbeet", "--error", "NOT_COORDINATOR",
                     admin_port=server.admin_port)
    assert bad.returncode == 1 and "400: api: unknown API 'Heartbeet'" in bad.stderr
    bad = kcoord_cli("faults", "add", "--api", "Heartbeat", "--error", "NOT_COORDINATOR", "--count", "-1",
                     admin_port=server.admin_port)
    assert bad.returncode == 1 and "count must be between 1" in bad.stderr
    nowhere = kcoord_cli("faults", "list")
    assert nowhere.returncode == 1 and "no admin endpoint" in nowhere.stderr
    assert admin.faults.list() == []


@pytest.mark.parametrize("value", ["127.0.0.1:8080", "https://127.0.0.1:1", "http://127.0.0.1:x",
                                   "http://:80", "http://127.0.0.1:70000"])
def test_a_bad_admin_listener_names_the_key(value):
    from kcoord.broker.config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError, match="kcoord.admin.listener"):
        BrokerConfig.load(overrides={"kcoord.admin.listener": value})
    assert BrokerConfig.load(overrides={"kcoord.admin.listener": "http://127.0.0.1:0"}).get(
        "kcoord.admin.listener") == "http://127.0.0.1:0"
    assert BrokerConfig.load().get("kcoord.admin.listener") is None
