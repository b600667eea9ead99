"""kcoord.testkit.links: the proxies a cluster's links run through, over real loopback sockets (an echo
server behind a proxy); each cut mode is seen as a client sees it."""
from __future__ import annotations

import socket
import threading

import pytest

from kcoord.cluster.node_connection import loopback_source
from kcoord.testkit.links import ANY, BLACKHOLE, RESET, LinkProxies


@pytest.fixture
def echo():
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                while data := conn.recv(4096):
                    conn.sendall(data)
            except OSError:
                pass  # the proxy reset it: what a cut does

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()
    stop.set()
    server.close()


@pytest.fixture
def links():
    proxies = LinkProxies().start()
    yield proxies
    proxies.close()


def _connect(proxy, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(2)
    sock.connect((proxy.host, proxy.port))
    return sock


def _round_trip(sock: socket.socket, data: bytes = b"ping") -> bytes:
    sock.sendall(data)
    return sock.recv(4096)


def test_bytes_flow_until_a_reset_cut_resets_open_and_new_connections(links, echo):
    proxy = links.add("p", "127.0.0.1", echo)
    with _connect(proxy) as sock:
        assert _round_trip(sock) == b"ping"
        links.cut(proxy, mode=RESET)
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            _round_trip(sock)
            _round_trip(sock)  # the RST may land after the first send
    with pytest.raises((ConnectionResetError, BrokenPipeError)):  # at connect, or at the first bytes
        with _connect(proxy) as sock:
            _round_trip(sock)
            _round_trip(sock)
    links.heal(proxy)
    with _connect(proxy) as sock:
        assert _round_trip(sock) == b"ping"


def test_a_blackhole_holds_bytes_silently_and_delivers_them_on_heal(links, echo):
    proxy = links.add("p", "127.0.0.1", echo)
    with _connect(proxy) as old:
        assert _round_trip(old) == b"ping"
        links.cut(proxy, mode=BLACKHOLE)
        old.sendall(b"held")
        with pytest.raises(TimeoutError):
            old.recv(4096)  # no answer, no reset
        with _connect(proxy) as new:  # accepted, never answered
            new.sendall(b"new")
            with pytest.raises(TimeoutError):
                new.recv(4096)
            links.heal(proxy)
            assert new.recv(4096) == b"new"
        assert old.recv(4096) == b"held"


def test_a_cut_of_one_source_leaves_the_others_flowing(links, echo):
    proxy = links.add("p", "127.0.0.1", echo)
    with _connect(proxy, "127.0.0.2") as cut, _connect(proxy, "127.0.0.3") as kept:
        links.cut(proxy, ["127.0.0.2"], RESET)
        assert _round_trip(kept) == b"ping"
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            _round_trip(cut)
            _round_trip(cut)
        links.cut(proxy, [ANY], BLACKHOLE)
        links.heal(proxy, ["127.0.0.2"])  # a cut of every source still holds it
        with _connect(proxy, "127.0.0.2") as again:
            again.sendall(b"x")
            with pytest.raises(TimeoutError):
                again.recv(4096)


def test_an_unknown_mode_is_refused(links, echo):
    proxy = links.add("p", "127.0.0.1", echo)
    with pytest.raises(ValueError, match="mode must be one of"):
        links.cut(proxy, mode="drop")


@pytest.mark.parametrize(("local", "remote", "source"), [
    ("127.0.0.3", "127.0.0.2", "127.0.0.3"),   # nodes on loopback: connect from our own address
    ("0.0.0.0", "127.0.0.2", None),            # a wildcard listener: the kernel chooses
    ("10.0.0.5", "127.0.0.2", None),
    ("127.0.0.3", "10.0.0.6", None),           # a remote leader cannot be reached from loopback
    ("127.0.0.3", "kcoord2", None),            # a host name: the kernel chooses
    ("::1", "127.0.0.2", None),
    (None, "127.0.0.2", None),
])
def test_the_fetchers_source_address(local, remote, source):
    assert loopback_source(local, remote) == source
