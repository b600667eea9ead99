"""Accepting TLS connections: the event loop's own SSL protocol (uvloop's, or asyncio's when the loop
is asyncio's) wraps the KafkaConnection, exactly as `create_server(ssl=...)` does, except that a failed
handshake is not silent: the connection hears of it (`tls_failed`) and logs it. The KafkaConnection's
connection_made comes only once the handshake succeeded, with the TLS transport.

Two things keep a small request's TLS cost to OpenSSL's own (measured on steady heartbeats):
- Between the SSL protocol and the KafkaConnection sits a `TlsReader`, a buffered protocol. Given a
  plain protocol, both loops' SSL protocols read each decrypted chunk with `SSLObject.read(256 KiB)`: a
  fresh 256 KiB bytes object per read, above glibc's mmap threshold until something raises it, so a
  request could cost an mmap, page faults, an mremap and an munmap. Given a buffer, they decrypt into it.
- `DirectSSLObject`: the SSL protocol calls its SSL object's read, write and pending several times per
  request; ssl.SSLObject's are Python methods that only forward to the C object's, so ours are the C
  object's own (same arguments, results and exceptions)."""
from __future__ import annotations

import asyncio
import asyncio.sslproto
import ssl
from typing import Any

HANDSHAKE_TIMEOUT_S = 30.0
# A TLS record holds at most 16 KiB of plaintext: a buffer of 32 KiB takes two at once, more than
# fits is read on the next loop turn (the SSL protocol schedules it). Kafka's SslTransportLayer holds
# buffers of a record's size per connection too.
READ_BUFFER_BYTES = 32 * 1024
_classes: dict[type, type] = {}


class DirectSSLObject(ssl.SSLObject):
    """An SSLObject whose hot methods are the C object's, not Python forwarders: a server context's
    `sslobject_class` (broker/security/tls.py). `_create` is what `SSLContext.wrap_bio` calls."""

    @classmethod
    def _create(cls, *args: Any, **kwargs: Any) -> DirectSSLObject:
        obj = super()._create(*args, **kwargs)  # pyright: ignore[reportAttributeAccessIssue]  (private in the stubs)
        inner = obj._sslobj
        obj.read, obj.write, obj.pending = inner.read, inner.write, inner.pending
        return obj


class TlsReader(asyncio.BufferedProtocol):
    """What the SSL protocol serves: decrypts into a buffer of its own (made at the first read: an idle
    connection holds none), hands the KafkaConnection a copy of what was read (its queue keeps frames
    across reads), and forwards the rest of the protocol."""

    __slots__ = ("connection", "_view")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self._view: memoryview | None = None

    def get_buffer(self, sizehint: int) -> memoryview:
        view = self._view
        if view is None:
            view = self._view = memoryview(bytearray(READ_BUFFER_BYTES))
        return view

    def buffer_updated(self, nbytes: int) -> None:
        self.connection.data_received(bytes(self._view[:nbytes]))  # pyright: ignore[reportOptionalSubscript]  (get_buffer came first)

    def connection_made(self, transport: Any) -> None:
        self.connection.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.connection.connection_lost(exc)

    def eof_received(self) -> bool | None:
        return self.connection.eof_received()

    def pause_writing(self) -> None:
        self.connection.pause_writing()

    def resume_writing(self) -> None:
        self.connection.resume_writing()


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
    proto = _protocol_class(loop)(loop, TlsReader(connection), context, waiter, server_side=True,
                                  ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
    proto.kafka_connection = connection

    def handshake_done(fut: asyncio.Future) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            connection.tls_failed(fut.exception())

    waiter.add_done_callback(handshake_done)
    return proto
