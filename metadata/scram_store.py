"""SCRAM credentials kept durably in `<log.dirs>/kcoord-scram-credentials.json` (Kafka keeps them in its
metadata log): per user and mechanism the salt, StoredKey, ServerKey and iterations, never a password.
In cluster mode the metadata store holds them instead (kcoord.broker.security.cluster_security follows
them into `replace_all`; the file is not read).

Read by SCRAM authentication, changed by AlterUserScramCredentials and `kcoord users` (which writes the
file directly only while no server runs on that directory, as `kafka-storage format --add-scram` does)."""
from __future__ import annotations

import base64
import os
from dataclasses import dataclass

from kcoord.metadata.json_file import read_json, write_json_atomically

FILE_NAME = "kcoord-scram-credentials.json"
# ScramMechanism's type ids on the wire (DescribeUserScramCredentials / AlterUserScramCredentials)
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF = {name: key for key, name in MECHANISM_TYPES.items()}
# The SCRAM mechanisms and their hashes (kcoord.broker.security.scram runs the exchange with them).
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass(frozen=True)
class ScramCredential:
    """What is kept of a user's password for one mechanism (never the password itself)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def encode_credential(c: ScramCredential) -> dict:
    return {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key), "server_key": _b64(c.server_key),
            "iterations": c.iterations}


def decode_credential(doc: dict) -> ScramCredential:
    return ScramCredential(base64.b64decode(doc["salt"]), base64.b64decode(doc["stored_key"]),
                           base64.b64decode(doc["server_key"]), int(doc["iterations"]))


class ScramStore:
    def __init__(self, log_dir: str, *, read_file: bool = True) -> None:
        self.path = os.path.join(log_dir, FILE_NAME)
        self._users: dict[str, dict[str, ScramCredential]] = {}
        for name, mechs in (read_json(self.path, {}) if read_file else {}).get("users", {}).items():
            self._users[name] = {mech: decode_credential(c) for mech, c in mechs.items() if mech in HASHES}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, int]]:
        """user -> {mechanism: iterations}"""
        return {u: {m: c.iterations for m, c in mechs.items()} for u, mechs in self._users.items() if mechs}

    def apply(self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        """Change several credentials at once, durably (a crash keeps all or none of the change)."""
        users = {u: dict(m) for u, m in self._users.items()}
        for user, mechanism in deletions:
            users.get(user, {}).pop(mechanism, None)
        for user, mechanism, credential in upserts:
            users.setdefault(user, {})[mechanism] = credential
        users = {u: m for u, m in users.items() if m}
        write_json_atomically(self.path, {"users": {
            u: {m: encode_credential(c) for m, c in mechs.items()} for u, mechs in users.items()}})
        self._users = users

    def replace_all(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Cluster mode: the credentials as the metadata store has them now (nothing written here)."""
        self._users = {u: dict(m) for u, m in users.items() if m}
