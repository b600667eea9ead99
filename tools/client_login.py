"""The client side of TLS and SASL for kcoord's own tools (`kcoord groups`, `kcoord users`), configured
as Kafka's tools are, with a `--command-config` properties file:

    security.protocol=SASL_SSL
    ssl.truststore.type=PEM
    ssl.truststore.location=/path/ca.pem
    sasl.mechanism=SCRAM-SHA-512
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="...";

(ssl.keystore.location: a PEM file with the client's key and certificate, for ssl.client.auth.)"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import socket
import ssl
from typing import Any

from kcoord.broker.security import jaas
from kcoord.broker.security.scram import HASHES, salted_password
from kcoord.protocol import messages as m


class LoginFailed(Exception):
    pass


class ClientSecurity:
    def __init__(self, props: dict[str, str]) -> None:
        self.protocol = props.get("security.protocol", "PLAINTEXT").upper()
        self.context: ssl.SSLContext | None = None
        if "SSL" in self.protocol:
            self.context = ssl.create_default_context(cafile=props.get("ssl.truststore.location"))
            if props.get("ssl.keystore.location"):
                self.context.load_cert_chain(props["ssl.keystore.location"], password=props.get("ssl.key.password"))
        self.mechanism = props.get("sasl.mechanism", "GSSAPI").upper()
        self.username = self.password = ""
        if self.protocol.startswith("SASL_"):
            for module in jaas.parse_jaas(props.get("sasl.jaas.config", "")):
                self.username = module.options.get("username", self.username)
                self.password = module.options.get("password", self.password)

    @classmethod
    def from_file(cls, path: str) -> ClientSecurity:
        from kcoord.broker.config import read_properties_file

        return cls(read_properties_file(path))

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        return self.context.wrap_socket(sock, server_hostname=host) if self.context is not None else sock

    def login(self, client: Any) -> None:
        """SaslHandshake v1 + SaslAuthenticate rounds on a KafkaWireClient; LoginFailed saying why."""
        if not self.protocol.startswith("SASL_"):
            return
        resp = client.request(m.SaslHandshakeRequest(mechanism=self.mechanism), version=1, api_key=17)
        if resp.error_code:
            raise LoginFailed(f"SASL mechanism {self.mechanism} refused (enabled: {resp.mechanisms})")
        if self.mechanism == "PLAIN":
            self._round(client, f"\0{self.username}\0{self.password}".encode())
            return
        algorithm = HASHES[self.mechanism]
        nonce = secrets.token_hex(16)
        first_bare = f"n={self.username.replace('=', '=3D').replace(',', '=2C')},r={nonce}"
        server_first = self._round(client, f"n,,{first_bare}".encode()).decode()
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        if not fields.get("r", "").startswith(nonce):
            raise LoginFailed("the server's SCRAM nonce does not extend ours")
        salted = salted_password(self.mechanism, self.password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", algorithm).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(hashlib.new(algorithm, client_key).digest(), auth_message, algorithm).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        final = self._round(client, f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
        server_key = hmac.new(salted, b"Server Key", algorithm).digest()
        expected = b"v=" + base64.b64encode(hmac.new(server_key, auth_message, algorithm).digest())
        if not hmac.compare_digest(final, expected):
            raise LoginFailed("the server's SCRAM signature is wrong")

    @staticmethod
    def _round(client: Any, token: bytes) -> bytes:
        resp = client.request(m.SaslAuthenticateRequest(auth_bytes=token), version=1, api_key=36)
        if resp.error_code:
            raise LoginFailed(resp.error_message or f"SASL authentication failed ({resp.error_code})")
        return bytes(resp.auth_bytes)


def add_command_config(parser: Any, *subparsers: Any) -> None:
    """Kafka's tools' --command-config (before or after the subcommand)."""
    import argparse

    parser.add_argument("--command-config", default=None, metavar="FILE",
                        help="client properties: security.protocol, ssl.truststore.location, sasl.mechanism, "
                             "sasl.jaas.config (as Kafka's tools)")
    for sub in subparsers:
        sub.add_argument("--command-config", default=argparse.SUPPRESS)


def use_command_config(args: Any) -> None:
    from kcoord.protocol.client import KafkaWireClient

    path = getattr(args, "command_config", None)
    KafkaWireClient.default_security = ClientSecurity.from_file(path) if path else None
