"""The acceptors: the listening sockets, accepted from as they read ready, each new socket put through the
connection quotas (Kafka's SocketServer.Acceptor.accept with ConnectionQuotas.inc; what to do is decided by
kcoord.broker.connection_quotas, pure).

Per accepted socket: record it in the broker's and the listener's creation rate and, over either limit or
with no connection slot free (`max.connections`), wait before accepting more (the rest stay in the kernel's
backlog, as with Kafka's blocked acceptor thread); then the ip's `connection_creation_rate`: over it the
socket is held, never read, and closed when the throttle ends (DelayedCloseSocket); then the per-ip count
(`max.connections.per.ip`): at it, closed at once. Otherwise the socket becomes a connection
(`connect(socket, listener, ip)`), counted until the server reports it closed (`closed`).

While no connection quota or limit is set (Kafka's defaults), the event loop's own server accepts (uvloop's,
in C) and each connection is only counted, as it starts: accepting in Python costs a connection about 45 µs
of CPU more. Once any is set (`limits_changed`: an ip quota altered, a dynamic setting changed), the listening
sockets are read here instead, in their read callback, as many as are queued; an acceptor that has to wait
unregisters its socket and a task waits, then registers it again. Nothing runs per request: a served
connection is the loop's ordinary transport.
"""
from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import socket
from collections.abc import Callable
from typing import Any

from kcoord.broker.connection_quotas import ConnectionLimits, ConnectionQuotas, normalized_ip
from kcoord.observability.metrics import Metrics

log = logging.getLogger("kcoord.server")

BACKLOG = 512
LimitsKey = tuple
# accept() failures that say the process is out of something: wait a second before accepting again (as the
# loop's own server does)
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def client_host(address: str) -> str:
    """The client's address as Kafka names it: an IPv4-mapped IPv6 address (a dual-stack listener's IPv4 client,
    `::ffff:1.2.3.4`) is its IPv4 address, as Java's InetAddress gives it, so ACL hosts, quotas by ip and
    DescribeGroups' client hosts see `1.2.3.4`."""
    if address.startswith("::ffff:") and "." in address:
        return address[7:]
    return address


class Acceptors:
    def __init__(self, quotas: ConnectionQuotas, metrics: Metrics, limits_key: Callable[[], LimitsKey],
                 limits_of: Callable[[LimitsKey, dict[str, int]], ConnectionLimits],
                 connect: Callable[[socket.socket, str, str], None], protocol_for: Callable[[str], Any]) -> None:
        self._quotas = quotas
        self._metrics = metrics
        self._limits_key = limits_key      # the settings as they are now (dynamic configs change them)
        self._limits_of = limits_of        # -> ConnectionLimits, given the overrides' hosts resolved to ips
        self._key: LimitsKey | None = None
        self._connect = connect            # an accepted socket -> a served connection, counted under the ip
        self._protocol_for = protocol_for  # the loop's server's protocol factory, per listener
        self._sockets: list[tuple[str, socket.socket]] = []
        self._reading: set[socket.socket] = set()                   # registered for accepts (limits set)
        self._servers: dict[socket.socket, asyncio.Server] = {}     # the loop accepts (no limit set)
        self._limited = False
        self._waits = 0                                             # acceptors waiting now
        self._started = False
        self._closing = False
        self._tasks: set[asyncio.Task[None]] = set()                # acceptors waiting, hosts being resolved
        self._held: dict[socket.socket, asyncio.TimerHandle] = {}   # throttled sockets, closed when it ends
        self._waiters: list[asyncio.Future[None]] = []              # acceptors waiting for a free slot

    async def bind(self, listener: str, host: str, port: int) -> int:
        """Listen on host:port (every address it resolves to, as loop.create_server does); the port bound."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host or None, port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        bound = port
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, True)
                sock.bind((address[0], bound, *address[2:]))
                sock.listen(BACKLOG)
                sock.setblocking(False)
            except OSError:
                sock.close()
                raise
            bound = sock.getsockname()[1]  # port 0: the other addresses get the same port
            self._sockets.append((listener, sock))
        return bound

    def start(self) -> None:
        """Accept on every bound socket (Kafka's Acceptor.start)."""
        self._started = True
        self.limits_changed()

    def limits_changed(self) -> None:
        """An ip quota or a setting may have changed: the next connections get it, accepted here or by the loop."""
        self._refresh_limits()
        if not self._started or self._closing:
            return
        self._limited = self._quotas.limited or self._waits > 0
        for listener, sock in self._sockets:
            if self._limited:
                server = self._servers.pop(sock, None)
                if server is not None:
                    server.close()  # its own descriptor of the socket; this one keeps listening
                self._resume(listener, sock)
            elif sock not in self._servers:
                self._pause(sock)
                self._spawn(self._serve_fast(listener, sock))

    async def _serve_fast(self, listener: str, sock: socket.socket) -> None:
        server = await asyncio.get_running_loop().create_server(
            lambda: self._protocol_for(listener), sock=sock.dup(), backlog=BACKLOG)
        if self._limited or self._closing or sock in self._servers:  # changed meanwhile
            server.close()
        else:
            self._servers[sock] = server

    def count(self, listener: str, ip: str) -> None:
        """A connection the loop accepted (nothing limited): counted until `closed`."""
        self._quotas.count(listener, ip)

    async def close(self) -> None:
        """Stop accepting; close the listening sockets and the throttled ones (Acceptor.closeAll)."""
        self._closing = True
        loop = asyncio.get_running_loop()
        for sock in self._reading:
            loop.remove_reader(sock)
        self._reading.clear()
        for server in self._servers.values():
            server.close()
        self._servers.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for _, sock in self._sockets:
            sock.close()
        for sock, timer in self._held.items():
            timer.cancel()
            sock.close()
        self._held.clear()

    def closed(self, listener: str, ip: str) -> None:
        """A counted connection ended: its slot is free (ConnectionQuotas.dec: notifyAll)."""
        self._quotas.closed(listener, ip)
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def _resume(self, listener: str, sock: socket.socket) -> None:
        if self._started and not self._closing and self._limited and sock not in self._reading:
            self._reading.add(sock)
            asyncio.get_running_loop().add_reader(sock, self._readable, listener, sock)

    def _pause(self, sock: socket.socket) -> None:
        if sock in self._reading:
            self._reading.discard(sock)
            asyncio.get_running_loop().remove_reader(sock)

    def _readable(self, listener: str, sock: socket.socket) -> None:
        for _ in range(BACKLOG):
            try:
                client, address = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:  # the peer gave up while queued
                continue
            except OSError as exc:  # out of file descriptors, a connection reset while queued...
                log.error("listener %s: accept failed: %s", listener, exc)
                if exc.errno in _OUT_OF_RESOURCES:
                    self._pause(sock)
                    asyncio.get_running_loop().call_later(1.0, self._resume, listener, sock)
                return
            try:
                if not self._accept(listener, sock, client, client_host(str(address[0]))):
                    return  # the acceptor waits; reading resumes when it is done
            except Exception:
                log.exception("listener %s: error while accepting a connection; closing it", listener)
                client.close()

    def _accept(self, listener: str, sock: socket.socket, client: socket.socket, ip: str) -> bool:
        """Accept `client` now (True), or leave it to a task that waits first (False: `sock` is paused)."""
        self._refresh_limits()
        quotas = self._quotas
        throttle_ms = quotas.record_connection(listener)
        if throttle_ms or not quotas.slot_available(listener):
            self._pause(sock)
            self._waits += 1
            self._spawn(self._wait_then_admit(listener, sock, client, ip, throttle_ms))
            return False
        self._admit(listener, client, ip)
        return True

    def _admit(self, listener: str, client: socket.socket, ip: str) -> None:
        admission = self._quotas.admit(listener, ip)
        if admission.accepted:
            client.setblocking(False)
            self._connect(client, listener, ip)
        elif admission.throttle_ms:
            log.debug("delaying closing of connection from %s for %d ms", ip, admission.throttle_ms)
            self._held[client] = asyncio.get_running_loop().call_later(
                admission.throttle_ms / 1000.0, self._close_held, client)
            self._metrics.inc("kcoord_connections_throttled_total", listener=listener)
        else:
            log.info("rejected connection from %s: the address already has the configured maximum of %d "
                     "connections", ip, admission.max_connections)
            client.close()
            self._metrics.inc("kcoord_connections_refused_total", listener=listener)

    async def _wait_then_admit(self, listener: str, sock: socket.socket, client: socket.socket, ip: str,
                               throttle_ms: int) -> None:
        try:
            await self._wait_for_slot(listener, throttle_ms)
            self._admit(listener, client, ip)
        except BaseException:
            client.close()
            raise
        finally:
            self._waits -= 1
            self._resume(listener, sock)  # what queued meanwhile is accepted as the socket reads ready
            self.limits_changed()  # the loop accepts again if the limits went meanwhile

    async def _wait_for_slot(self, listener: str, throttle_ms: int) -> None:
        """waitForConnectionSlot: the throttle's time, and until a connection slot is free."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        end = started + throttle_ms / 1000.0
        while True:
            remaining = end - loop.time()
            if remaining <= 0 and self._quotas.slot_available(listener):
                break
            waiter = loop.create_future()
            self._waiters.append(waiter)
            # a close wakes it; the settings are looked at again at least once a second (a raised
            # max.connections frees slots too: Kafka's updateBrokerMaxConnections notifies)
            await asyncio.wait([waiter], timeout=remaining if remaining > 0 else 1.0)
            self._refresh_limits()
        self._metrics.inc("kcoord_connection_accept_wait_seconds_total", loop.time() - started, listener=listener)

    def _close_held(self, client: socket.socket) -> None:
        self._held.pop(client, None)
        client.close()

    def _spawn(self, work) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _refresh_limits(self) -> None:
        """New limits when the settings changed. max.connections.per.ip.overrides' ips apply at once; its host
        names once resolved (Kafka resolves them, InetAddress.getByName, when the config is updated)."""
        key = self._limits_key()
        if key == self._key:
            return
        self._key = key
        per_ip: dict[str, int] = {}
        hosts: dict[str, int] = {}
        for host, count in key[-1].items():
            try:
                per_ip[str(ipaddress.ip_address(host))] = count
            except ValueError:
                hosts[host] = count
        self._quotas.configure(self._limits_of(key, per_ip))
        if hosts:
            self._spawn(self._resolve(key, per_ip, hosts))

    async def _resolve(self, key: LimitsKey, per_ip: dict[str, int], hosts: dict[str, int]) -> None:
        loop = asyncio.get_running_loop()
        resolved = dict(per_ip)
        for host, count in hosts.items():
            try:
                infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            except OSError as exc:
                log.warning("max.connections.per.ip.overrides: cannot resolve %s: %s", host, exc)
                continue
            for info in infos:
                resolved.setdefault(normalized_ip(str(info[4][0])), count)
        if key == self._key:  # not changed again meanwhile
            self._quotas.configure(self._limits_of(key, resolved))
            self.limits_changed()
