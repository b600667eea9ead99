"""SaslHandshake (key 17): the client names the SASL mechanism it will use on a SASL listener.

Versions:
  v0: the SASL tokens that follow are bare size-prefixed frames (no Kafka header)
  v1: the tokens that follow travel in SaslAuthenticate requests (KIP-152)
An enabled mechanism is answered NONE with the listener's mechanisms; another one
UNSUPPORTED_SASL_MECHANISM, and the connection closes (Kafka's SaslServerAuthenticator). On an
authenticated connection it starts a re-authentication (KIP-368). On a listener without SASL it is
ILLEGAL_SASL_STATE, as KafkaApis answers a handshake that reaches it.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=17, name="SaslHandshake", min_version=0, max_version=1)
def handle(ctx: RequestContext, request: m.SaslHandshakeRequest):
    session = ctx.session
    if session is None or session.state is None:
        return m.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    error = session.handshake(ctx.api_version, request.mechanism)
    return m.SaslHandshakeResponse(error_code=error, mechanisms=list(session.security.mechanisms))
