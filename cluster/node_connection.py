"""A request from this node to another: the one client behind the replica fetchers' Fetch, the transaction
coordinator's WriteTxnMarkers, the partition leaders' KIP-890 verification and the share-group state
calls. One connection per peer, one request in flight, reopened after a failure (Kafka's NetworkClient
as ReplicaFetcherBlockingSend and InterBrokerSendThread use it, reduced to that).

Nodes sharing one machine on distinct loopback addresses connect from their own address (as nodes on
distinct hosts do), so the test kit's link proxies can tell which node a connection is from.
"""
from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import struct
from collections.abc import Callable
from typing import Any

from kcoord.cluster.metadata_image import MetadataImage
from kcoord.protocol import messages as m
from kcoord.protocol.headers import decode_response_header, encode_request_frame

_SIZE = struct.Struct(">i")


def node_address(image: MetadataImage, node_id: int) -> tuple[str, int] | None:
    """The node's first advertised listener (Kafka: inter.broker.listener.name's endpoint), or None."""
    broker = image.brokers.get(node_id)
    if broker is None or not broker.info.listeners:
        return None
    endpoint = broker.info.listeners[0]
    return endpoint.host, endpoint.port


def loopback_source(local_host: str | None, remote_host: str) -> str | None:
    """The address to connect from: our own loopback address when the remote is on loopback too (the
    kernel would pick 127.0.0.1 for every node), else None (the kernel's choice)."""
    try:
        local, remote = ipaddress.ip_address(local_host or ""), ipaddress.ip_address(remote_host)
    except ValueError:
        return None
    return str(local) if local.is_loopback and remote.is_loopback and local.version == remote.version else None


class NodeConnection:
    """`await request(key, version, body, timeout_s)`: the response, or OSError / EOFError / TimeoutError
    (the connection is closed then, and the next request opens a new one at the address looked up anew:
    a restarted node may listen elsewhere). `local_host`: this node's listener host (see loopback_source)."""

    def __init__(self, address: Callable[[], tuple[str, int] | None], client_id: str,
                 local_host: str | None = None) -> None:
        self._address = address
        self._client_id = client_id
        self._local_host = local_host
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
            source = loopback_source(self._local_host, address[0])
            self._reader, self._writer = await asyncio.open_connection(
                *address, local_addr=None if source is None else (source, 0))
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
