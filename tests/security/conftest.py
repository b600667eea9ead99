"""Servers with TLS / SASL listeners for the security tests, and the certificates they use (made here,
never committed: tests/support/certs.py)."""
from __future__ import annotations

import re

import pytest

from kcoord.broker.security.scram import make_credential
from kcoord.metadata.scram_store import ScramStore
from kcoord.testkit.broker_process import BrokerProcess
from kcoord.testkit.pytest_plugin import session_launcher
from tests.support.certs import TestPki

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_admin="admin-secret";')
SCRAM_USERS = {"bob": "bob-secret", "carol": "carol-secret"}
_READY = re.compile(r"kcoord ready: listening on ([^;\n]+)")


class SecureServer(BrokerProcess):
    """A broker whose listeners are named: `address("SASL_SSL")` -> "127.0.0.1:port"."""

    def address(self, listener: str) -> str:
        names = [item.split("://")[0].upper() for item in self.overrides["listeners"].split(",")]
        bound = _READY.findall(self.log_text())[-1].split(", ")
        return bound[names.index(listener.upper())].strip()


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> TestPki:
    return TestPki(tmp_path_factory.mktemp("pki"))


def tls_settings(pki: TestPki, client_auth: str = "none") -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_pem),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca), "ssl.client.auth": client_auth}


def add_scram_users(data_dir, users: dict[str, str] = SCRAM_USERS) -> None:
    """Credentials written before the server starts (as `kafka-storage format --add-scram` does)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    ScramStore(str(data_dir)).apply(
        [(user, mech, make_credential(mech, pw)) for user, pw in users.items()
         for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")], [])


def secure_server(workdir, overrides: dict[str, str], name: str = "secure") -> SecureServer:
    """A SecureServer of the session's launcher, not started yet: write its credentials first."""
    return SecureServer(workdir, overrides, name=name, launcher=session_launcher())


def start_secure(tmp_path, overrides: dict[str, str], name: str = "secure") -> SecureServer:
    server = secure_server(tmp_path, {"group.min.session.timeout.ms": "1000", **overrides}, name=name)
    add_scram_users(server.data_dir)
    return server.start()


@pytest.fixture
def secure_server_factory(tmp_path):
    started: list[SecureServer] = []

    def start(overrides: dict[str, str], name: str | None = None) -> SecureServer:
        server = start_secure(tmp_path, overrides, name or f"secure{len(started)}")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
