"""Accepting TLS connections: the event loop's own SSL protocol (uvloop's, or asyncio's when the loop
is asyncio's) wraps the KafkaConnection, exactly as `create_server(ssl=...)` does, except that a failed
handshake is not silent: the connection hears of it (`tls_failed`) and logs it. The KafkaConnection's
connection_made comes only once the handshake succeeded, with the TLS transport."""
from __future__ import annotations

import asyncio
import asyncio.sslproto
from typing import Any

HANDSHAKE_TIMEOUT_S = 30.0
_classes: dict[type, type] = {}


def _protocol_class(loop: asyncio.AbstractEventLoop) -> type:
    base: type = asyncio.sslproto.SSLProtocol
    try:
        import uvloop

        if isinstance(loop, uvloop.Loop):
            base = uvloop.loop.SSLProtocol  # pyright: ignore[reportAttributeAccessIssue]  (not in uvloop's stubs)
    except ImportError:
        pass
    cls = _classes.get(base)
    if cls is None:
        class TlsAccept(base):  # type: ignore[valid-type,misc]
            """Remembers the TCP peer (for the log line of a failed handshake)."""

            def connection_made(self, transport: Any) -> None:
                self.kafka_connection.tcp_connected(transport)
                super().connection_made(transport)

        cls = _classes[base] = TlsAccept
    return cls


def tls_protocol(connection: Any, context: Any) -> Any:
    """The protocol to hand the loop for one accepted TLS connection served by `connection`."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    proto = _protocol_class(loop)(loop, connection, context, waiter, server_side=True,
                                  ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
    proto.kafka_connection = connection

    def handshake_done(fut: asyncio.Future) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            connection.tls_failed(fut.exception())

    waiter.add_done_callback(handshake_done)
    return proto
