"""Bad input on secure listeners closes only that connection, with a log line, while a well-behaved
client goes on being served: a plaintext client on a TLS port, a TLS client on a plaintext port, and
(hypothesis) random bytes at the TLS record layer, at the SASL handshake and as SASL tokens."""
from __future__ import annotations

import socket
import ssl
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import encode_request_frame
from tests.security.conftest import PLAIN_JAAS, start_secure, tls_settings
from tests.security.raw import raw, scram_login


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki):
    srv = start_secure(tmp_path_factory.mktemp("bad-input"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        **tls_settings(pki), "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "sasl.jaas.config": PLAIN_JAAS})
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def good(server, pki):
    """A SCRAM-authenticated TLS client that must keep being served throughout."""
    c = raw(server.address("SASL_SSL"), ca=str(pki.ca))
    assert scram_login(c, "SCRAM-SHA-512", "bob", "bob-secret").error_code == ErrorCode.NONE
    yield c
    c.close()


def served(c) -> bool:
    md = c.request(3, 9, m.MetadataRequest(topics=None, allow_auto_topic_creation=False))
    return bool(md.brokers)


def _send(address: str, data: bytes, wrap: ssl.SSLContext | None = None) -> None:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        try:
            if wrap is not None:
                s = wrap.wrap_socket(s, server_hostname=host)
            s.sendall(data)
            s.settimeout(0.05)
            s.recv(1024)
        except (OSError, ssl.SSLError):
            pass  # closed or refused: what we expect; only the server's health matters


def test_plaintext_client_on_tls_port(server, good):
    with raw(server.address("SSL")) as c:
        c.send_request(18, 3, m.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert c.closed_by_peer()
    server.wait_for_log("TLS handshake failed")
    assert served(good)


def test_tls_client_on_plaintext_port(server, good, pki):
    with pytest.raises((ssl.SSLError, OSError)):
        raw(server.address("PLAINTEXT"), ca=str(pki.ca))
    server.wait_for_log("a TLS handshake on a plaintext listener")
    assert served(good)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(junk=st.binary(min_size=1, max_size=400))
def test_random_bytes_at_the_tls_record_layer(server, good, pki, junk):
    _send(server.address("SSL"), junk)
    _send(server.address("SASL_SSL"), b"\x16\x03\x01" + junk)
    _send(server.address("SSL"), junk, wrap=ssl.create_default_context(cafile=str(pki.ca)))  # inside TLS
    assert served(good)


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    return encode_request_frame(api_key, version, 1, "fuzz", body)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(kind=st.sampled_from(["frame", "handshake-body", "token-v1", "token-v0", "mechanism"]),
       junk=st.binary(max_size=300))
def test_random_bytes_at_the_sasl_handshake(server, good, kind, junk):
    handshake = _frame(17, 1, m.request_codec(17, 1).encode(m.SaslHandshakeRequest(mechanism="SCRAM-SHA-512")))
    if kind == "frame":
        data = struct.pack(">i", len(junk)) + junk
    elif kind == "handshake-body":
        data = _frame(17, 1, junk)
    elif kind == "token-v1":
        data = handshake + _frame(36, 2, m.request_codec(36, 2).encode(m.SaslAuthenticateRequest(auth_bytes=junk)))
    elif kind == "token-v0":
        v0 = _frame(17, 0, m.request_codec(17, 0).encode(m.SaslHandshakeRequest(mechanism="PLAIN")))
        data = v0 + struct.pack(">i", len(junk)) + junk
    else:
        data = _frame(17, 1, m.request_codec(17, 1).encode(
            m.SaslHandshakeRequest(mechanism=junk.decode("latin-1")[:50])))
    _send(server.address("SASL_PLAINTEXT"), data)
    assert served(good)


def test_nothing_crashed(server, good):
    """Last: every bad connection was closed with a reason, none with a traceback."""
    assert served(good)
    log = server.log_text()
    assert "Traceback" not in log and "error while serving" not in log
