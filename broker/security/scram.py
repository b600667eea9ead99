"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer serves them.

Pure: no I/O. A credential is what the broker keeps (salt, StoredKey, ServerKey, iterations; never the
password). The exchange: client-first `n,[a=authzid],n=<user>,r=<cnonce>[,ext]` -> server-first
`r=<cnonce+snonce>,s=<salt>,i=<iterations>` -> client-final `c=<binding>,r=<nonce>,p=<proof>` ->
server-final `v=<ServerSignature>`.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

from kcoord.broker.security.sasl_errors import SaslFailure

# The credential and the mechanisms' hashes are defined with the store that keeps them (below the serving
# path); re-exported here for the SASL exchange's users.
from kcoord.metadata.scram_store import HASHES as HASHES
from kcoord.metadata.scram_store import ScramCredential as ScramCredential

# Kafka's ScramMechanism.minIterations; AlterUserScramCredentials also caps them (MAX_ITERATIONS).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # printable without ','
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_VALUE}))?,(?P<bare>n=(?P<saslname>{_VALUE}),r=(?P<nonce>{_VALUE})"
    rf"(?P<extensions>(?:,[a-zA-Z]+={_VALUE})*))$")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>[A-Za-z0-9+/=]+),r=(?P<nonce>{_VALUE})(?:,[a-zA-Z]+={_VALUE})*),"
    rf"p=(?P<proof>[A-Za-z0-9+/=]+)$")


def _hmac(algorithm: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, algorithm).digest()


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    algorithm = HASHES[mechanism]
    client_key = _hmac(algorithm, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(algorithm, client_key).digest(),
                           _hmac(algorithm, salted, b"Server Key"), iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password.encode(), salt, iterations),
                                  salt, iterations)


def _server_nonce() -> str:
    """Letters and digits (base 36, as Kafka's ScramFormatter.secureRandomString)."""
    n = secrets.randbits(160)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = []
    while n:
        n, d = divmod(n, 36)
        out.append(digits[d])
    return "".join(out)


def username(saslname: str) -> str:
    """RFC 5802 saslname -> user name ("=2C" is ',', "=3D" is '=')."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One exchange. `lookup(user) -> ScramCredential | None` reads the credential store."""

    def __init__(self, mechanism: str, lookup) -> None:
        self.mechanism = mechanism
        self._algorithm = HASHES[mechanism]
        self._lookup = lookup
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.authorization_id = ""

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            self._state = "failed"
            raise SaslFailure("SCRAM message is not UTF-8") from None
        if self._state == "first":
            return self._first(text)
        if self._state == "final":
            return self._final(text)
        raise SaslFailure(f"Unexpected challenge in Sasl server state {self._state.upper()}", illegal_state=True)

    def _first(self, text: str) -> bytes:
        self._state = "failed"
        match = _CLIENT_FIRST.match(text)
        if match is None:
            raise SaslFailure("Invalid SCRAM client first message format")
        name = username(match["saslname"])
        credential = self._lookup(name)
        if credential is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        if match["authzid"] and match["authzid"] != name:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different "
                              "from username", public=True)
        if credential.iterations < MIN_ITERATIONS:
            raise SaslFailure(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                              f"for {self.mechanism}")
        self._credential = credential
        self.authorization_id = name
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + _server_nonce()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        self._state = "failed"
        match = _CLIENT_FINAL.match(text)
        if match is None:
            raise SaslFailure("Invalid SCRAM client final message format")
        # endsWith, as Kafka since 3.8.1: librdkafka before 2.6.1 echoes its own nonce once more in front
        if not match["nonce"].endswith(self._nonce):
            raise SaslFailure("Invalid client nonce in the final client message.")
        try:
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            raise SaslFailure("Invalid SCRAM client final message format") from None
        credential = self._credential
        if credential is None:  # a final message before a first one: the state machine never allows it
            raise SaslFailure("Invalid SCRAM client final message: no exchange in progress")
        auth_message = f"{self._client_first_bare},{self._server_first},{match['without_proof']}".encode()
        signature = _hmac(self._algorithm, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslFailure("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._algorithm, client_key).digest(), credential.stored_key):
            raise SaslFailure("Invalid client credentials")
        server_signature = _hmac(self._algorithm, credential.server_key, auth_message)
        self._state = "complete"
        return b"v=" + base64.b64encode(server_signature)
