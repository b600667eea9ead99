"""Connection limits on a TLS listener: applied as the connection is accepted, before the TLS handshake (Kafka's
Acceptor.accept runs ConnectionQuotas.inc; the handshake happens later, in the Processor's selector:
core/src/main/scala/kafka/network/SocketServer.scala). A connection past max.connections.per.ip is closed
before any handshake; one past max.connections waits, its hello unread, until a slot is free."""
from __future__ import annotations

import ssl
import threading

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.testkit.waiting import wait_until
from tests.security.conftest import tls_settings
from tests.security.raw import raw

VERSIONS = m.ApiVersionsRequest(client_software_name="t", client_software_version="1")


def answers(c) -> bool:
    return c.request(18, 3, VERSIONS).error_code == ErrorCode.NONE


def opened(address: str, ca: str):
    try:
        return raw(address, ca=ca)
    except (ssl.SSLError, OSError):
        return None


def test_past_max_connections_per_ip_the_tls_connection_is_closed_before_its_handshake(secure_server_factory, pki):
    srv = secure_server_factory({"listeners": "SSL://127.0.0.1:0", **tls_settings(pki), "max.connections.per.ip": "2"})
    address, ca = srv.address("SSL"), str(pki.ca)
    held = [raw(address, ca=ca), raw(address, ca=ca)]
    try:
        assert all(answers(c) for c in held)
        with pytest.raises((ssl.SSLError, OSError)):
            raw(address, ca=ca)
        assert all(answers(c) for c in held)
        held.pop().close()
        third = wait_until(lambda: opened(address, ca), 10, "a TLS connection once a slot is free")
        held.append(third)
        assert answers(third)
    finally:
        for c in held:
            c.close()


def test_past_max_connections_the_tls_handshake_waits_for_a_free_slot(secure_server_factory, pki):
    srv = secure_server_factory({"listeners": "SSL://127.0.0.1:0", **tls_settings(pki), "max.connections": "1"})
    address, ca = srv.address("SSL"), str(pki.ca)
    first = raw(address, ca=ca)
    second: dict = {}
    waiting = threading.Thread(target=lambda: second.update(c=raw(address, ca=ca)), daemon=True)
    try:
        assert answers(first)
        waiting.start()
        assert all(answers(first) for _ in range(50))  # the node serves on (long enough for a handshake) ...
        assert waiting.is_alive()                       # ... while the second's waits, its hello unread
        first.close()
        waiting.join(10)
        assert answers(second["c"])
    finally:
        first.close()
        if "c" in second:
            second["c"].close()
