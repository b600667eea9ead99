"""A request from this node to another (cluster mode): the transaction markers a coordinator sends to
partition leaders, the KIP-890 verification a partition leader asks of a transaction coordinator. One
connection per peer node, one request in flight, reopened after a failure (Kafka's NetworkClient as its
InterBrokerSendThread uses it, reduced to that).
"""
from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Callable, Iterable
from typing import Any

from kcoord.cluster.metadata_image import MetadataImage
from kcoord.protocol import messages as m
from kcoord.protocol.headers import decode_response_header, encode_request_frame

_SIZE = struct.Struct(">i")


def node_address(image: MetadataImage, node_id: int) -> tuple[str, int] | None:
    """The node's first advertised listener (the inter-broker one, as the replica fetchers use), or None."""
    broker = image.brokers.get(node_id)
    if broker is None or not broker.info.listeners:
        return None
    endpoint = broker.info.listeners[0]
    return endpoint.host, endpoint.port


def by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """Partitions grouped as requests carry them: topic -> partition indexes, in order."""
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        topics.setdefault(topic, []).append(partition)
    return topics


class NodeConnection:
    """`await request(key, version, body, timeout_s)`: the response, or OSError / EOFError / TimeoutError
    (the connection is closed then, and the next request opens a new one at the address looked up anew:
    a restarted node may listen elsewhere)."""

    def __init__(self, address: Callable[[], tuple[str, int] | None], client_id: str) -> None:
        self._address = address
        self._client_id = client_id
        self._lock = asyncio.Lock()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    async def request(self, key: int, version: int, request: Any, timeout_s: float) -> Any:
        async with self._lock:
            try:
                return await asyncio.wait_for(self._round_trip(key, version, request), timeout_s)
            except BaseException:
                await self.close()
                raise

    async def _round_trip(self, key: int, version: int, request: Any) -> Any:
        if self._writer is None:
            address = self._address()
            if address is None:
                raise ConnectionError("the node has no known address")
            self._reader, self._writer = await asyncio.open_connection(*address)
        assert self._reader is not None
        self._correlation_id += 1
        body = m.request_codec(key, version).encode(request)
        self._writer.write(encode_request_frame(key, version, self._correlation_id, self._client_id, body))
        await self._writer.drain()
        (size,) = _SIZE.unpack(await self._reader.readexactly(4))
        frame = await self._reader.readexactly(size)
        correlation_id, offset = decode_response_header(frame, key, version)
        if correlation_id != self._correlation_id:
            raise ConnectionError(f"correlation id {correlation_id}, expected {self._correlation_id}")
        response, _end = m.response_codec(key, version).decode(frame, offset)
        return response

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
