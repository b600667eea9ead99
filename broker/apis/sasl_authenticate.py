"""SaslAuthenticate (key 36): one SASL token each way, after SaslHandshake v1.

Versions:
  v0: auth bytes, error code + message
  v1: session_lifetime_ms: with connections.max.reauth.ms set, the session lasts that long and the client
      re-authenticates before it ends (KIP-368); a client that ever sent v1+ is held to it
  v2: flexible
A failed exchange answers SASL_AUTHENTICATION_FAILED (Kafka's message: its own for a wrong PLAIN password
or a changed principal, a fixed one otherwise, which does not tell whether the user exists) and the
connection closes. After a completed authentication: ILLEGAL_SASL_STATE (KafkaApis).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=36, name="SaslAuthenticate", min_version=0, max_version=2)
def handle(ctx: RequestContext, request: m.SaslAuthenticateRequest):
    session = ctx.session
    if session is None or session.state is None:
        return m.SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"", session_lifetime_ms=0,
            error_message="SaslAuthenticate request received after successful authentication")
    result = session.authenticate(ctx.api_version, request.auth_bytes)
    if result is None:  # a re-authentication that changed mechanism: Kafka closes without an answer
        return None
    error, message, token, lifetime = result
    return m.SaslAuthenticateResponse(error_code=error, error_message=message, auth_bytes=token,
                                      session_lifetime_ms=lifetime)
