"""Cuttable TCP links for a test cluster: small forwarding proxies whose links can be cut and healed.

    links = LinkProxies().start()                       # one asyncio loop in a daemon thread
    proxy = links.add("etcd-for-node2", "127.0.0.1", ("127.0.0.1", 2379))
    proxy.port                                          # point the node at 127.0.0.1:proxy.port
    links.cut(proxy, mode=BLACKHOLE)                    # every source; or sources={"127.0.0.3"}
    links.heal(proxy)
    links.close()

Two ways a link breaks, because they test different things:
- RESET: open connections are aborted (an RST: SO_LINGER 0) and a new one is closed as soon as it is
  accepted. The peer learns at once (ECONNRESET): a crash of the other side, or a firewall that rejects.
- BLACKHOLE: open connections stop moving bytes (the proxy stops reading, so the kernel's buffers fill)
  and a new one is accepted but gets no answer. Nothing tells the peer: it must notice by its own
  timeouts (gRPC keepalive, a lease that is not renewed, a Fetch that times out) -- a real partition.
  On heal the held bytes flow on, as TCP retransmission delivers them once a partition ends.

A source is the peer's host (nodes on distinct loopback addresses bind their outgoing connections to
them, so a proxy in front of node A can tell node B's connections from node C's). Used by
kcoord.testkit.cluster.KafkaCluster (`cut` / `heal`); standalone otherwise.
"""
from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

RESET = "reset"
BLACKHOLE = "blackhole"
MODES = (RESET, BLACKHOLE)
ANY = "*"  # a cut of every source
_CHUNK = 65536


@dataclass(eq=False)
class _Connection:
    source: str
    client: asyncio.StreamWriter
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    upstream: asyncio.StreamWriter | None = None

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                _reset(writer)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST rather than a FIN: the peer sees ECONNRESET, as when a firewall rejects."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class LinkProxy:
    """One listening address forwarding to `target()` (looked up at each new connection). Its cuts are a
    map source -> mode (ANY: every source); only its LinkProxies' loop touches it."""

    def __init__(self, name: str, host: str, target: Callable[[], tuple[str, int]]) -> None:
        self.name = name
        self.host = host
        self.port = 0
        self._target = target
        self._cuts: dict[str, str] = {}
        self._connections: set[_Connection] = set()
        self._server: asyncio.Server | None = None
        self.accepted = 0  # connections accepted, for tests of the kit

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def mode_for(self, source: str) -> str | None:
        """How a connection from `source` is cut now (None: it flows)."""
        return self._cuts.get(source) or self._cuts.get(ANY)

    async def _listen(self, port: int) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        source = writer.get_extra_info("peername")[0]
        conn = _Connection(source, writer)
        mode = self.mode_for(source)
        if mode == RESET:
            _reset(writer)
            return
        if mode is None:
            conn.flowing.set()
        self._connections.add(conn)
        try:
            await conn.flowing.wait()  # a blackholed newcomer waits, unanswered, for the heal
            if writer.is_closing():
                return  # reset meanwhile (or the proxy closed)
            try:
                up_reader, conn.upstream = await asyncio.open_connection(*self._target())
            except OSError:
                _reset(writer)
                return
            await asyncio.gather(self._pump(conn, reader, conn.upstream), self._pump(conn, up_reader, writer))
        finally:
            self._connections.discard(conn)
            conn.abort()

    @staticmethod
    async def _pump(conn: _Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await conn.flowing.wait()
                data = await reader.read(_CHUNK)
                if not data:
                    break
                await conn.flowing.wait()  # cut while reading: hold the bytes until the heal
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        conn.abort()  # one side ended: so does the other (the proxy is transparent to closes)

    def _cut(self, sources: Iterable[str], mode: str) -> None:
        for source in sources:
            self._cuts[source] = mode
        for conn in list(self._connections):
            now = self.mode_for(conn.source)
            if now == RESET:
                conn.abort()
                conn.flowing.set()  # a newcomer held by a blackhole: its task ends
            elif now == BLACKHOLE:
                conn.flowing.clear()

    def _heal(self, sources: Iterable[str] | None) -> None:
        if sources is None:
            self._cuts.clear()
        else:
            for source in sources:
                self._cuts.pop(source, None)
        for conn in self._connections:
            if self.mode_for(conn.source) is None:
                conn.flowing.set()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.abort()
            conn.flowing.set()  # let its task end


class LinkProxies:
    """Every LinkProxy of one cluster, served by one event loop in a daemon thread; its methods are
    called from the test's thread and return when the loop has done what they ask."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kcoord-link-proxies", daemon=True)
        self.proxies: dict[str, LinkProxy] = {}

    def start(self) -> LinkProxies:
        self._thread.start()
        return self

    def _call(self, coro_or_fn, *args):
        async def run():
            result = coro_or_fn(*args)
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=30)

    def add(self, name: str, host: str, target: tuple[str, int] | Callable[[], tuple[str, int]],
            port: int = 0) -> LinkProxy:
        """A proxy listening on host:port (0: a free one) forwarding to `target`."""
        proxy = LinkProxy(name, host, target if callable(target) else (lambda: target))
        self._call(proxy._listen, port)
        self.proxies[name] = proxy
        return proxy

    def cut(self, proxy: LinkProxy, sources: Iterable[str] = (ANY,), mode: str = BLACKHOLE) -> None:
        """Connections from `sources` (peer hosts; ANY: all) through `proxy` stop, as `mode` says."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self._call(proxy._cut, list(sources), mode)

    def heal(self, proxy: LinkProxy, sources: Iterable[str] | None = None) -> None:
        """Lift the cuts of `sources` (None: every cut of the proxy); held connections flow again."""
        self._call(proxy._heal, None if sources is None else list(sources))

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        for proxy in self.proxies.values():
            self._call(proxy._close)
        self._call(_cancel_all)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def _cancel_all() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["ANY", "BLACKHOLE", "MODES", "RESET", "LinkProxies", "LinkProxy"]
