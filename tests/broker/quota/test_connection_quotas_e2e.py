"""Connection quotas over TCP against one kcoord process: raw sockets that each send an ApiVersions request are
the burst; real admin clients set the quotas.

Kafka's side: core/src/main/scala/kafka/network/SocketServer.scala -- Acceptor.accept (a
ConnectionThrottledException puts the socket in throttledSockets, a DelayedCloseSocket: never read, closed by
closeThrottledConnections once the throttle ends; a TooManyConnectionsException closes it at once) and
ConnectionQuotas.inc / recordIpConnectionMaybeThrottle / updateIpConnectionRateQuota; the dynamic settings:
SocketServer.reconfigure (max.connections.per.ip and its overrides are among SocketServer.ReconfigurableConfigs).

A held connection is closed with its request unread, so the client sees the end as EOF or as a reset (the
kernel resets a socket closed with unread data, Kafka's as kcoord's); either way no answer ever comes.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import urllib.request

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from kcoord.protocol import messages as m
from kcoord.protocol.headers import encode_request_frame
from kcoord.testkit.waiting import wait_until

NODE = shutil.which("node")
JS = os.path.join(os.path.dirname(__file__), "..", "..", "js")
NEEDS_NODE = pytest.mark.skipif(
    NODE is None or not os.path.isdir(os.path.join(JS, "node_modules", "@platformatic")),
    reason="node and tests/js/node_modules (make test installs them) are needed")
API_VERSIONS = encode_request_frame(18, 3, 1, "burst", m.request_codec(18, 3).encode(
    m.ApiVersionsRequest(client_software_name="burst", client_software_version="1")))
TIMEOUT_S = 10.0


def open_and_ask(port: int, host: str = "127.0.0.1", source: str | None = None) -> socket.socket:
    """A new connection (from `source`, a loopback address, if given) that has sent ApiVersions; its answer is
    read later, by `outcome`."""
    sock = socket.create_connection((host, port), timeout=TIMEOUT_S,
                                    source_address=None if source is None else (source, 0))
    sock.sendall(API_VERSIONS)
    return sock


def outcome(sock: socket.socket) -> str:
    """'answered' (a response frame came), or 'closed' (EOF or reset with no answer)."""
    try:
        data = sock.recv(4)
    except ConnectionResetError:
        return "closed"
    return "answered" if len(data) > 0 else "closed"


def unanswered(sock: socket.socket) -> bool:
    """Nothing to read and no EOF (now): the server holds the connection without answering."""
    sock.setblocking(False)
    try:
        sock.recv(1)
        return False
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.settimeout(TIMEOUT_S)


def burst(port: int, count: int, host: str = "127.0.0.1", source: str | None = None) -> list[str]:
    socks = [open_and_ask(port, host, source) for _ in range(count)]
    try:
        return [outcome(s) for s in socks]
    finally:
        for s in socks:
            s.close()


def metric(broker, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{") and 'listener="PLAINTEXT"' in line)


class IpQuotaAdmin:
    """tests/js/ip_connection_quota.mjs: sets the ip's connection_creation_rate, then removes it when told, over
    the connections it opened before the quota existed (a new one would be counted, and throttled, too)."""

    def __init__(self, bootstrap: str, ip: str, rate: int) -> None:
        self.proc = subprocess.Popen([NODE, "ip_connection_quota.mjs", bootstrap, ip, str(rate)], cwd=JS,  # type: ignore[list-item]
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def answer(self) -> dict:
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        assert line, self.proc.stderr.read()  # type: ignore[union-attr]
        return json.loads(line)

    def remove(self) -> dict:
        self.proc.stdin.write("remove\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return self.answer()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@NEEDS_NODE
@pytest.mark.kcoord(overrides={"metrics.port": "0"})
def test_connections_over_an_ips_creation_rate_are_held_unanswered_then_closed(kafka_broker):
    """1 connection a second for 127.0.0.1: a young rate counts at least quota.window.num - 1 = 10 windows, so 10
    of a quick burst are within it (Rate.windowSize); the rest are throttled (11 in 10 s: (1.1 - 1) / 1 * 10 s =
    1 s, QuotaUtils.throttleTime), held unanswered and closed. With the quota removed, all are answered."""
    port = kafka_broker.port
    admin = IpQuotaAdmin(kafka_broker.bootstrap_servers, "127.0.0.1", 1)
    try:
        assert admin.answer()["errors"] == [0]
        socks = [open_and_ask(port) for _ in range(15)]
        try:
            wait_until(lambda: metric(kafka_broker, "kcoord_connections_throttled_total") == 5, 10,
                       "the acceptor to throttle the 5 connections over the rate")
            assert unanswered(socks[10])  # throttled for a second: held, not closed at once
            outcomes = [outcome(s) for s in socks]
        finally:
            for s in socks:
                s.close()
        assert outcomes == ["answered"] * 10 + ["closed"] * 5

        assert admin.remove()["errors"] == [0]
        assert burst(port, 30) == ["answered"] * 30
    finally:
        admin.close()


@pytest.mark.kcoord(overrides={"max.connections.per.ip": "3", "metrics.port": "0"})
def test_a_connection_past_max_connections_per_ip_is_closed_at_once_and_a_freed_slot_admits_one(kafka_broker):
    """TooManyConnectionsException: the 4th connection from 127.0.0.1 is closed at once, the 3 open ones keep
    being served; once one closes, a new one is admitted (ConnectionQuotas.dec)."""
    port = kafka_broker.port
    held = [open_and_ask(port) for _ in range(3)]
    try:
        assert [outcome(s) for s in held] == ["answered"] * 3
        assert burst(port, 1) == ["closed"]
        for s in held:  # the rest of the first answer, then a second request on each
            s.recv(1 << 16)
            s.sendall(API_VERSIONS)
        assert [outcome(s) for s in held] == ["answered"] * 3
        assert metric(kafka_broker, "kcoord_connections_refused_total") == 1
        held.pop().close()
        wait_until(lambda: burst(port, 1) == ["answered"], 10, "the closed connection's slot to be free")
    finally:
        for s in held:
            s.close()


@pytest.mark.kcoord(overrides={"metrics.port": "0"})
def test_max_connections_per_ip_overrides_change_at_run_time(kafka_broker):
    """max.connections.per.ip.overrides is a dynamic broker config (SocketServer.ReconfigurableConfigs): set
    with AlterConfigs, it limits the next connections; deleted, they are unlimited again."""
    port = kafka_broker.port

    def alter(configs: dict) -> None:
        admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers, client_id="conf-admin")
        try:
            admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs=configs)], incremental=True)
        finally:
            admin.close()
        # the admin's connections are from 127.0.0.1 too: counted until the node has seen them close
        wait_until(lambda: metric(kafka_broker, "kcoord_connections") == 0, 10, "the admin's connections to close")

    alter({"max.connections.per.ip.overrides": "127.0.0.1:2,localhost:2"})
    socks = [open_and_ask(port) for _ in range(3)]
    try:
        assert [outcome(s) for s in socks] == ["answered", "answered", "closed"]
    finally:
        for s in socks:
            s.close()
    wait_until(lambda: burst(port, 1) == ["answered"], 10, "the closed connections' slots to be free")
    alter({"max.connections.per.ip.overrides": ("DELETE", None)})
    assert burst(port, 5) == ["answered"] * 5


@pytest.mark.parametrize("limit", ["max.connections", "listener.name.plaintext.max.connections"])
def test_past_max_connections_the_acceptor_waits_for_a_free_slot(kafka_broker_factory, limit):
    """ConnectionQuotas.waitForConnectionSlot / connectionSlotAvailable: at max.connections (the broker's or the
    listener's) the acceptor waits (Kafka refuses nothing); the connection waiting is served once another
    closes."""
    kafka_broker = kafka_broker_factory({limit: "2", "metrics.port": "0"})
    port = kafka_broker.port
    held = [open_and_ask(port) for _ in range(2)]
    waiting = open_and_ask(port)
    try:
        assert [outcome(s) for s in held] == ["answered"] * 2
        held[1].recv(1 << 16)
        held[1].sendall(API_VERSIONS)
        assert outcome(held[1]) == "answered"  # the node serves on, the third connection still waits
        assert unanswered(waiting)
        held.pop(0).close()
        assert outcome(waiting) == "answered"
        assert metric(kafka_broker, "kcoord_connection_accept_wait_seconds_total") > 0
    finally:
        for s in [*held, waiting]:
            s.close()


@pytest.mark.kcoord(overrides={"max.connection.creation.rate": "1", "metrics.port": "0"})
def test_over_the_brokers_creation_rate_the_acceptor_waits_and_refuses_nothing(kafka_broker):
    """ConnectionQuotas.waitForConnectionSlot with recordConnectionAndGetThrottleTimeMs: the 11th connection in a
    young 10 s window takes the broker over 1 a second, and the acceptor waits out the throttle before accepting
    it and the next; every connection is answered."""
    assert burst(kafka_broker.port, 12) == ["answered"] * 12
    assert metric(kafka_broker, "kcoord_connection_accept_wait_seconds_total") > 0
    assert metric(kafka_broker, "kcoord_connections_throttled_total") == 0
