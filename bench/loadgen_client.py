"""A lean asyncio Kafka connection for benchmark members: send a frame, await its answer.

A Protocol (not streams) keeps the per-request cost low, so thousands of members fit in one
process. Responses are matched by correlation id; several requests may be in flight, but a
member only ever has one.
"""

from __future__ import annotations

import asyncio
import itertools
import struct

from bench import loadgen_wire as w

_SIZE = struct.Struct(">i")


class ConnectionLost(Exception):
    pass


class KafkaConn(asyncio.Protocol):
    def __init__(self):
        self.transport = None
        self._buf = bytearray()
        self._pending: dict[int, asyncio.Future] = {}
        self._corr = itertools.count(1)

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1") -> KafkaConn:
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(cls, host, port)
        return proto

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        buf = self._buf
        buf += data
        off, n = 0, len(buf)
        while n - off >= 4:
            size = _SIZE.unpack_from(buf, off)[0]
            if n - off - 4 < size:
                break
            payload = bytes(buf[off + 4 : off + 4 + size])
            off += 4 + size
            fut = self._pending.pop(_SIZE.unpack_from(payload, 0)[0], None)
            if fut is not None and not fut.done():
                fut.set_result(payload)
        del buf[:off]

    def connection_lost(self, exc):
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionLost(f"connection lost: {exc}"))
        self._pending.clear()

    async def call(self, api_key: int, version: int, body: bytes, timeout: float = 60) -> bytes:
        """Send one request, return the response payload (header included)."""
        if self.transport is None or self.transport.is_closing():
            raise ConnectionLost("closed")
        corr = next(self._corr)
        fut = asyncio.get_running_loop().create_future()
        self._pending[corr] = fut
        self.transport.write(w.frame(api_key, version, corr, body))
        try:
            async with asyncio.timeout(timeout):  # (wait_for wraps each call in more machinery)
                return await fut
        finally:
            self._pending.pop(corr, None)

    def close(self):
        if self.transport is not None:
            self.transport.close()


async def open_many(port: int, n: int, batch: int = 500) -> list[KafkaConn]:
    """n connections, opened in batches so the server's accept backlog never overflows."""
    conns: list[KafkaConn] = []
    while len(conns) < n:
        k = min(batch, n - len(conns))
        conns += await asyncio.gather(*(KafkaConn.open(port) for _ in range(k)))
    return conns
