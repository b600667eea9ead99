"""RawKafka over TLS, and a SASL client written from the RFCs (PLAIN, SCRAM) for raw-protocol tests."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.support.raw_kafka import TIMEOUT_S, RawKafka


def raw(address: str, ca: str | None = None, cert: str | None = None, key: str | None = None) -> RawKafka:
    """A RawKafka to "host:port"; over TLS when `ca` is given (with a client certificate if `cert`)."""
    host, _, port = address.rpartition(":")
    client = RawKafka(int(port), host)
    if ca is not None:
        ctx = ssl.create_default_context(cafile=ca)
        if cert:
            ctx.load_cert_chain(cert, key)
        plain: socket.socket = client.sock
        client.sock = ctx.wrap_socket(plain, server_hostname=host)
        client.sock.settimeout(TIMEOUT_S)
    return client


def handshake(c: RawKafka, mechanism: str, version: int = 1):
    return c.request(17, version, m.SaslHandshakeRequest(mechanism=mechanism))


def authenticate(c: RawKafka, token: bytes, version: int = 2):
    return c.request(36, version, m.SaslAuthenticateRequest(auth_bytes=token))


class ScramClient:
    """RFC 5802 client side, independent of the server's code."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user, self.password = user, password
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.first_bare = f"n={user},r={self.nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes, echo_prefix: str = "") -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), base64.b64decode(fields["s"]),
                                     int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={echo_prefix}{fields['r']}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def scram_login(c: RawKafka, mechanism: str, user: str, password: str, version: int = 2):
    """Handshake v1 + the two SaslAuthenticate rounds; returns the last response."""
    assert handshake(c, mechanism).error_code == ErrorCode.NONE
    client = ScramClient(mechanism, user, password)
    first = authenticate(c, client.first(), version)
    assert first.error_code == ErrorCode.NONE, first
    final = authenticate(c, client.final(first.auth_bytes), version)
    if final.error_code == ErrorCode.NONE:
        assert final.auth_bytes == b"v=" + base64.b64encode(client.server_signature)
    return final


def plain_login(c: RawKafka, user: str, password: str, version: int = 2):
    assert handshake(c, "PLAIN").error_code == ErrorCode.NONE
    return authenticate(c, f"\0{user}\0{password}".encode(), version)
