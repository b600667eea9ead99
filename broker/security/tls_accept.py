"""Accepting TLS connections: the event loop's own SSL protocol (uvloop's, or asyncio's when the loop
is asyncio's) wraps the KafkaConnection, exactly as `create_server(ssl=...)` does, except that a failed
handshake is not silent: the connection hears of it (`tls_failed`) and logs it. The KafkaConnection's
connection_made comes only once the handshake succeeded, with the TLS transport.

What a small request costs over TLS is kept to OpenSSL's own work (measured on steady heartbeats) by the
SSL object the server's contexts make, `DirectSSLObject` (broker/security/tls.py sets it):
- Both loops' SSL protocols read decrypted data with `SSLObject.read(256 KiB)`, which makes a 256 KiB bytes
  object per read and shrinks it: above glibc's mmap threshold (until something raises it), so a request
  could cost an mmap, page faults, an mremap and an munmap. Ours reads at most READ_CHUNK_BYTES at a time
  (the SSL protocols read until nothing is pending, so a large request is read in several chunks).
- They call read, write and pending several times per request; ssl.SSLObject's are Python methods that only
  forward to the C object's, so ours are the C object's own (read: with its size capped).
"""
from __future__ import annotations

import asyncio
import asyncio.sslproto
import ssl
from typing import Any

HANDSHAKE_TIMEOUT_S = 30.0
# A TLS record holds at most 16 KiB of plaintext: a read of that much takes a whole record, and its bytes
# object comes from the heap, far below glibc's mmap threshold (128 KiB by default).
READ_CHUNK_BYTES = 16 * 1024 + 256
_classes: dict[type, type] = {}


class DirectSSLObject(ssl.SSLObject):
    """An SSLObject whose hot methods are the C object's, not Python forwarders, and whose reads without a
    buffer are capped at READ_CHUNK_BYTES: a server context's `sslobject_class`. `_create` is what
    `SSLContext.wrap_bio` calls."""

    @classmethod
    def _create(cls, *args: Any, **kwargs: Any) -> DirectSSLObject:
        obj = super()._create(*args, **kwargs)  # pyright: ignore[reportAttributeAccessIssue]  (private in the stubs)
        inner = obj._sslobj
        read = inner.read

        def capped_read(len: int = 1024, buffer: Any = None) -> Any:  # noqa: A002  (SSLObject.read's names)
            if buffer is not None:
                return read(len, buffer)
            return read(len if len < READ_CHUNK_BYTES else READ_CHUNK_BYTES)

        obj.read, obj.write, obj.pending = capped_read, inner.write, inner.pending
        return obj


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
