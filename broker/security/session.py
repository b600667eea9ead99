"""One connection's security state: who it is (its KafkaPrincipal) and where its SASL exchange stands.

As Kafka's SaslServerAuthenticator: before authentication only ApiVersions and SaslHandshake may come,
then (SaslHandshake v1+) only SaslAuthenticate until the mechanism completes; after SaslHandshake v0 the
client sends bare size-prefixed tokens and gets bare tokens back. A failure answers Kafka's error and the
connection closes. With connections.max.reauth.ms a session expires (for clients whose SaslAuthenticate
is v1+, which learn the lifetime): a SaslHandshake then starts a re-authentication (KIP-368) for the same
principal and mechanism, and any other request on an expired session closes the connection.
No I/O: the server asks `admit` / `raw_token` and closes when `close_reason` is set.
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any

from kcoord.broker.connection import CloseConnection
from kcoord.broker.security.plain import PlainServer
from kcoord.broker.security.principal import ANONYMOUS, KafkaPrincipal, user
from kcoord.broker.security.sasl_errors import SaslFailure
from kcoord.broker.security.scram import HASHES, ScramServer
from kcoord.protocol.errors import ErrorCode

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
_SIZE = struct.Struct(">i")


@dataclass
class ListenerSecurity:
    name: str
    protocol: str                 # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ssl_context: Any = None       # ssl.SSLContext for SSL / SASL_SSL
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] | None = None
    reauth_ms: int = 0
    scram_lookup: Any = None      # (user, mechanism) -> ScramCredential | None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


class ConnectionSession:
    def __init__(self, security: ListenerSecurity, clock=time.monotonic) -> None:
        self.security = security
        self.principal: KafkaPrincipal = ANONYMOUS
        self._clock = clock
        # "handshake" -> "authenticate" -> "complete"; None when the listener has no SASL
        self.state: str | None = "handshake" if security.sasl else None
        self.raw_tokens = False          # after SaslHandshake v0
        self.mechanism: str | None = None
        self._server: Any = None
        self._previous: KafkaPrincipal | None = None  # set while re-authenticating
        self._bad_reauth: str | None = None
        self.supports_reauth = False
        self.expires_at: float | None = None
        self.close_reason: str | None = None  # set: close once the answer is written
        # (name, version) from ApiVersions v3+, for client telemetry's subscriptions (KIP-714)
        self.client_software: tuple[str, str] | None = None
        self._watch()

    def _watch(self) -> None:
        # Must every request pass `admit` (and skip the frame fast paths)? A plain attribute: the server
        # reads it on every read from the socket.
        self.watching = self.state is not None and (self.state != "complete" or self.expires_at is not None)

    def tls_established(self, ssl_object: Any) -> None:
        if self.security.protocol == "SSL":  # over SASL_SSL the SASL exchange names the principal
            from kcoord.broker.security.tls import peer_principal

            self.principal = peer_principal(ssl_object)

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def admit(self, api_key: int, api_name: str) -> None:
        """CloseConnection when `api_key` may not come now."""
        state = self.state
        if state == "handshake":
            if api_key not in (API_VERSIONS, SASL_HANDSHAKE):
                raise CloseConnection(f"unexpected Kafka request of type {api_name} during SASL handshake")
        elif state == "authenticate":
            if api_key != SASL_AUTHENTICATE:
                raise CloseConnection(f"unexpected Kafka request of type {api_name} during SASL authentication")
        elif state == "complete" and api_key != SASL_HANDSHAKE and self.expires_at is not None \
                and self._clock() >= self.expires_at:
            raise CloseConnection("SASL session expired (connections.max.reauth.ms) without re-authentication")

    # -- SaslHandshake ----------------------------------------------------------------------------
    def handshake(self, version: int, mechanism: str) -> ErrorCode:
        if self.state == "complete":  # a re-authentication begins (KIP-368)
            self._previous = self.principal
            if mechanism != self.mechanism:
                self._bad_reauth = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                    f"re-authentication of mechanism '{self.mechanism}'")
        if mechanism not in self.security.mechanisms:
            self.close_reason = f"unsupported SASL mechanism {mechanism!r} (enabled: {list(self.security.mechanisms)})"
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism if self._bad_reauth is None else self.mechanism
        self._server = (PlainServer(self.security.plain_users or {}) if mechanism == "PLAIN"
                        else ScramServer(mechanism, lambda name: self.security.scram_lookup(name, mechanism)))
        self.state = "authenticate"
        self.raw_tokens = version == 0
        self._watch()
        return ErrorCode.NONE

    # -- SaslAuthenticate (or a bare token after SaslHandshake v0) ---------------------------------
    def authenticate(self, version: int, token: bytes) -> tuple[ErrorCode, str | None, bytes, int] | None:
        """(error, error message, token to send back, session lifetime ms); None: close, answer nothing."""
        if self.state == "complete":
            return (ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful "
                    "authentication", b"", 0)
        if self._bad_reauth is not None:  # Kafka closes without answering (REAUTH_BAD_MECHANISM)
            self.close_reason = self._bad_reauth
            return None
        self.supports_reauth = self.supports_reauth or version > 0
        try:
            answer = self._server.evaluate(bytes(token))
            if self._server.complete:
                principal = user(self._server.authorization_id)
                if self._previous is not None and principal != self._previous:
                    raise SaslFailure(f"Cannot change principals during re-authentication from "
                                      f"{self._previous.principal_type}.{self._previous.name}: "
                                      f"{principal.principal_type}.{principal.name}", public=True)
                return ErrorCode.NONE, None, answer, self._completed(principal)
            return ErrorCode.NONE, None, answer, 0
        except SaslFailure as exc:
            which = "re-authentication" if self.reauthenticating else "authentication"
            self.close_reason = f"SASL/{self.mechanism} {which} failed: {exc.reason}"
            code = ErrorCode.ILLEGAL_SASL_STATE if exc.illegal_state else ErrorCode.SASL_AUTHENTICATION_FAILED
            return code, exc.client_message(self.mechanism, self.reauthenticating), b"", 0

    def _completed(self, principal: KafkaPrincipal) -> int:
        self.principal = principal
        self.state = "complete"
        self._previous = None
        self._server = None
        self.raw_tokens = False
        lifetime = self.security.reauth_ms
        self.expires_at = self._clock() + lifetime / 1000.0 if lifetime > 0 and self.supports_reauth else None
        self._watch()
        return lifetime

    def raw_token(self, payload: bytes) -> bytes:
        """A bare token after SaslHandshake v0 -> the size-prefixed bare answer (b"" on failure, when
        Kafka closes without answering)."""
        result = self.authenticate(0, payload)
        if result is None or result[0] != ErrorCode.NONE:
            return b""
        answer = result[2]
        return _SIZE.pack(len(answer)) + answer


def scram_mechanism(name: str) -> bool:
    return name in HASHES
