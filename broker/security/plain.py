"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer serves it: one token
`authzid NUL authcid NUL password`, checked against the listener's PlainLoginModule user_<name> entries."""
from __future__ import annotations

import hmac

from kcoord.broker.security.sasl_errors import SaslFailure


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("Unexpected challenge in Sasl server state COMPLETE", illegal_state=True)
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, name, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not name:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self._users.get(name)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password", public=True)
        if authzid and authzid != name:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different "
                              "from username", public=True)
        self.authorization_id = name
        self.complete = True
        return b""
