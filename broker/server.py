"""The transport layer: asyncio listeners and one KafkaConnection per socket.

A connection reads ahead into a bounded queue (pausing the socket at the high-water mark), answers the
queued requests strictly in order (inline when the handler does not wait, else in a task; a frame
handler's deferred answer, when its future is done), and writes respect the transport's flow control.
Framing and parsing live in broker/connection.py; what a request means lives in broker/apis/.
"""
from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kcoord.broker import registry
from kcoord.broker.acceptor import Acceptors, LimitsKey, client_host
from kcoord.broker.connection import (
    CloseConnection,
    ConnectionState,
    Request,
    encode_response,
    parse_request,
)
from kcoord.broker.connection_quotas import ConnectionLimits
from kcoord.broker.context import RequestContext
from kcoord.broker.security.listener_config import setting
from kcoord.broker.security.session import ConnectionSession
from kcoord.broker.security.tls_accept import tls_protocol

if TYPE_CHECKING:  # the composition root builds the server (a run-time import would be a cycle)
    from kcoord.broker.app import Broker

log = logging.getLogger("kcoord.server")

_SIZE_API_KEY = struct.Struct(">ih")  # a request frame starts with its size, then the header's api_key


@dataclass(frozen=True, slots=True)
class BoundListener:
    name: str
    host: str
    port: int  # the port actually bound (an ephemeral one when configured as 0)


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: KafkaServer, listener: str, seq: int) -> None:
        self.server = server
        self.listener = listener
        self.seq = seq
        self.state = ConnectionState(server.max_request_bytes, server.high_water, server.low_water)
        self.queue: deque[memoryview] = deque()
        self.transport: asyncio.Transport | None = None
        self.connection_id = ""
        self.peer = ("?", 0)
        self._writable = asyncio.Event()
        self._writable.set()
        # True while a task owns the queue (a request whose handler awaits) or a frame handler's answer
        # is deferred; nothing is served inline meanwhile, so requests are still answered one at a time
        # and in order.
        self._busy = False
        # The request whose frame handler answers later: (api name, frame size, started)
        self._deferred: tuple[str, int, float] | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._last_active = time.monotonic()
        self._draining = False
        self._lost = False
        self._hooks = server.broker.hooks
        self._frame_handlers = server.frame_handlers
        # Who the peer is and where its SASL exchange stands (broker/security/session.py); a TLS
        # listener's handshake runs before anything is read (connection_made -> _start_tls).
        self.session: ConnectionSession = server.session(listener)
        self._tls = self.session.security.ssl_context
        self._tcp: asyncio.BaseTransport | None = None
        self._guards = server.guards  # api key -> authorization guard, when an authorizer is configured
        # Each request is logged at DEBUG by the general path; a connection opened while that is on
        # serves every request through it.
        self._log_requests = log.isEnabledFor(logging.DEBUG)
        # Frame handlers may answer here: connected, writable, not draining, not logging requests.
        self._direct = False
        self._metrics = server.metrics
        self._request_quota = server.broker.request_quota
        self._muted_until = 0.0  # monotonic time a throttle (KIP-219) ends; 0: not throttled
        self.closed = asyncio.get_running_loop().create_future()
        self.counted_ip: str | None = None  # the ip the connection quotas count it under, until it ends

    # -- asyncio.Protocol -------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  (uvloop transports are not asyncio.Transport subclasses)
        if self._tls is not None:  # the handshake is done (broker/security/tls_accept.py)
            self.session.tls_established(transport.get_extra_info("ssl_object"))
        else:
            self.tcp_connected(transport)
        self._direct = not self._log_requests
        self._arm_idle_timer()
        self._metrics.connection_opened(self.listener)

    def tcp_connected(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername") or ("?", 0)
        local = transport.get_extra_info("sockname") or ("?", 0)
        self.peer = (client_host(str(peer[0])), int(peer[1]))
        self.connection_id = f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{self.seq}"
        self._tcp = transport  # under TLS: the socket's transport, while the handshake runs
        if self.counted_ip is None:  # the loop's server accepted it (no connection limit set): counted here
            self.counted_ip = self.peer[0]
            self.server.acceptors.count(self.listener, self.counted_ip)

    def tls_failed(self, exc: BaseException) -> None:
        """The TLS handshake failed (a plaintext client, an untrusted certificate, a timeout...): the
        loop's SSL protocol closed the socket; this connection was never served."""
        if self._lost:
            return  # aborted at shutdown, already reported
        log.warning("closing connection %s (client %s): TLS handshake failed: %s", self.connection_id,
                    self.peer[0], str(exc) or type(exc).__name__)
        self._lost = True
        self.server.connection_ended(self)
        if not self.closed.done():
            self.closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._last_active = time.monotonic()
        # A read that is one whole request, with nothing queued before it, of an API that has a frame
        # handler (Heartbeat): answered from the frame itself, here.
        if self._direct and not self._busy and len(data) > 6 and not self.session.watching:
            size, api_key = _SIZE_API_KEY.unpack_from(data)
            if size == len(data) - 4:
                served = self._frame_handlers.get(api_key)
                if served is not None and self._serve_frame(data, size, served):
                    return
        try:
            frames = self.state.receive(data)
        except Exception as exc:  # a frame we cannot split (CloseConnection)
            self._serving_failed(exc)
            return
        if frames:
            self.queue.extend(frames)
            if not self._busy:
                self._pump()
            if self.queue and self.state.should_pause() and self.transport is not None:
                self.transport.pause_reading()

    def eof_received(self) -> bool:
        # Like Kafka, no half-close: the peer's EOF ends the connection (returning False lets the
        # transport close, which calls connection_lost).
        return False

    def pause_writing(self) -> None:
        self._writable.clear()
        self._direct = False

    def resume_writing(self) -> None:
        self._writable.set()
        self._direct = not (self._draining or self._lost or self._log_requests or self._muted_until)
        if not self._busy:
            self._pump()  # serving stopped at the high-water mark of the write buffer

    def connection_lost(self, exc: Exception | None) -> None:
        # The request being served is not cancelled: a handler may hold coordinator state (a pending
        # JoinGroup, an append awaiting fsync) that must complete; its answer is simply dropped, as
        # Kafka drops responses for closed connections. Queued requests are discarded.
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._lost = True
        self._direct = False
        self.queue.clear()
        self._writable.set()
        self.server.connection_ended(self)
        self._metrics.connection_closed(self.listener)
        for listener in self.server.broker.disconnect_listeners:
            listener(self.connection_id)
        if not self.closed.done():
            self.closed.set_result(None)

    # -- lifecycle --------------------------------------------------------------------------------
    def close(self, reason: str | None = None) -> None:
        if reason:
            log.warning("closing connection %s (client %s): %s", self.connection_id, self.peer[0], reason)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def drain_and_close(self) -> None:
        """Shutdown: read nothing more, answer what is already queued, then close."""
        self._draining = True
        self._direct = False
        if self.transport is None and self._tcp is not None:  # still in its TLS handshake
            self._tcp.abort()  # pyright: ignore[reportAttributeAccessIssue]  (a socket transport: it has abort)
            self.tls_failed(ConnectionAbortedError("the server is shutting down"))
            return
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        if not self._busy:
            self._pump()

    def _arm_idle_timer(self) -> None:
        idle_s = self.server.idle_ms / 1000.0
        if idle_s <= 0:
            return
        due = self._last_active + idle_s - time.monotonic()
        self._idle_timer = asyncio.get_running_loop().call_later(max(due, 0.0), self._check_idle)

    def _check_idle(self) -> None:
        busy = self.state.pending > 0
        if not busy and time.monotonic() - self._last_active >= self.server.idle_ms / 1000.0:
            log.info("closing connection %s: idle for more than connections.max.idle.ms=%d",
                     self.connection_id, self.server.idle_ms)
            self.close()
            return
        if busy:
            self._last_active = time.monotonic()
        self._arm_idle_timer()

    # -- serving: one request at a time, in order -------------------------------------------------
    # A request whose handler answers without awaiting (a heartbeat, most of the time) is served
    # right here in the protocol callback: no task switch, no wakeup. The first one that has to
    # wait hands the queue to a task, which serves it and the rest of the queue, then hands back.
    def _pump(self) -> None:
        while self.queue and not self._lost:
            if not self._writable.is_set():
                return  # resume_writing pumps again
            if self._muted_until and not self._draining:
                return  # throttled: _unmute pumps again
            frame = self.queue.popleft()
            try:
                pending = self._begin(frame)
            except Exception as exc:
                self._serving_failed(exc)
                return
            if pending is not None:
                self._busy = True
                worker = asyncio.get_running_loop().create_task(self._serve_async(frame, pending),
                                                                name=f"conn-{self.seq}")
                self.server.workers.add(worker)
                worker.add_done_callback(self.server.workers.discard)
                return
            self._request_done(len(frame))
        if self._draining and not self._busy:
            self.close()

    async def _serve_async(self, frame: memoryview, pending: Coroutine[Any, Any, None]) -> None:
        try:
            await pending
            if not self._writable.is_set():
                await self._writable.wait()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._serving_failed(exc)
            return
        self._request_done(len(frame))
        self._busy = False
        self._pump()

    def _serve_frame(self, frame: bytes, size: int, served: tuple[str, registry.FrameHandler]) -> bool:
        """Serve a whole frame with its API's frame handler (only while `_direct`); False when it must
        take the general path (the handler declined it, hooks are installed, or the connection closes)."""
        transport = self.transport
        if self._hooks.installed or transport.is_closing() or not self.state.takes_whole(size):  # pyright: ignore[reportOptionalMemberAccess]  (only while _direct: connected)
            return False
        started = time.perf_counter()
        try:
            answer = served[1](self.server.broker, frame, self.peer[0])
        except Exception as exc:
            self._serving_failed(exc)
            return True
        if answer is None:
            return False
        if answer.__class__ is not tuple:  # a future: the connection waits for it, like a handler that awaits
            self.state.serving_whole(size)
            self._busy = True
            self._deferred = (served[0], size, started)
            answer.add_done_callback(self._frame_answered)  # pyright: ignore[reportAttributeAccessIssue]  (not a tuple: the future)
            return True
        self.state.served_whole(size)
        self._metrics.request_done(served[0], answer[0], time.perf_counter() - started)
        transport.write(answer[1])  # pyright: ignore[reportOptionalMemberAccess]
        return True

    def _frame_answered(self, answer: asyncio.Future) -> None:
        """A deferred frame answer is there: write it (unless the peer went away), then serve on."""
        name, size, started = self._deferred
        self._deferred = None
        try:
            error_code, frame = answer.result()
            self._metrics.request_done(name, error_code, time.perf_counter() - started)
            transport = self.transport
            if not self._lost and not transport.is_closing():  # pyright: ignore[reportOptionalMemberAccess]  (a deferred answer: connected)
                transport.write(frame)  # pyright: ignore[reportOptionalMemberAccess]
        except (Exception, asyncio.CancelledError) as exc:  # a cancelled answer is a bug too
            self._serving_failed(exc)
            return  # busy until it is gone, as when a handler that awaits fails
        self._request_done(size)
        self._busy = False
        self._pump()

    def _serving_failed(self, exc: BaseException) -> None:
        """The one place that decides what an exception escaping a serving path (framing, parsing, the
        session, a handler, a hook, a frame handler or its deferred answer) means. Either way only this
        connection closes: CloseConnection is an expected end, logged as one line with its reason;
        anything else is a bug, logged with its traceback."""
        if isinstance(exc, CloseConnection):
            self.close(exc.reason)
            return
        log.error("closing connection %s: error while serving a request", self.connection_id, exc_info=exc)
        self.close()

    def _request_done(self, size: int) -> None:
        self._last_active = time.monotonic()
        self.state.request_done(size)
        if self.state.should_resume() and not self._draining and not self._muted_until and self.transport is not None:
            self.transport.resume_reading()

    def _begin(self, frame: memoryview) -> Coroutine[Any, Any, None] | None:
        """Serve `frame` if its handler answers at once (None), else the coroutine that finishes it."""
        started = time.perf_counter()
        session = self.session
        if session.watching and session.raw_tokens:  # a bare SASL token after SaslHandshake v0
            answer = session.raw_token(bytes(frame))
            if session.close_reason is not None:
                raise CloseConnection(session.close_reason)
            self.transport.write(answer)  # pyright: ignore[reportOptionalMemberAccess]  (serving: connected)
            return None
        request = parse_request(frame)
        hdr = request.header
        if session.watching:
            session.admit(hdr.api_key, request.spec.name)  # CloseConnection when it may not come now
        # positional (the field order of RequestContext): measurably cheaper per request than keywords
        ctx = RequestContext(self.server.broker, hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id,
                             self.peer[0], self.peer[1], self.listener, self.connection_id, session)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s: %s v%d correlation %d from %s", self.connection_id, request.spec.name,
                      hdr.api_version, hdr.correlation_id, hdr.client_id)
        timed = self._request_quota.active and hdr.api_key not in REQUEST_QUOTA_EXEMPT
        if self._hooks.active(hdr.api_key):
            return self._finish(request, self._call_hooked(ctx, request), started, ctx, timed)
        response = self._handle(ctx, request)
        if hasattr(response, "__await__"):  # a coroutine or future; cheaper than inspect.isawaitable
            return self._finish(request, response, started, ctx, timed)
        if timed:
            self._record_request_time(ctx, response, time.perf_counter() - started)
        self._respond(request, response, started)
        if ctx.throttle_ms:  # the handler put it in its answer too
            self._throttled(ctx, request)
        return None

    async def _finish(self, request: Request, awaitable: Awaitable[Any], started: float,
                      ctx: RequestContext, timed: bool = False) -> None:
        if timed:  # only the time this request's steps run counts, not its waits (fsync, long poll)
            steps = _TimedSteps(awaitable, time.perf_counter() - started)
            response = await steps
            self._record_request_time(ctx, response, steps.seconds)
        else:
            response = await awaitable
        if ctx.throttle_ms:
            self._set_throttle_time(response, ctx.throttle_ms)
        self._respond(request, response, started)
        if ctx.throttle_ms:
            self._throttled(ctx, request)

    def _throttled(self, ctx: RequestContext, request: Request) -> None:
        self._metrics.inc("kcoord_throttle_seconds_total", ctx.throttle_ms / 1000.0, api=request.spec.name,
                          client_id=ctx.client_id or "")
        self._mute(ctx.throttle_ms)

    def _record_request_time(self, ctx: RequestContext, response: Any, seconds: float) -> None:
        """request_percentage (ClientRequestQuotaManager.maybeRecordAndGetThrottleTimeMs): the serving time
        as a percentage of one thread-second; a throttle goes into the answer and mutes the connection."""
        throttle_ms = self._request_quota.record(ctx.session.principal.name, ctx.client_id or "", seconds * 100.0)
        if throttle_ms:
            ctx.throttle_ms = max(ctx.throttle_ms, throttle_ms)
            self._set_throttle_time(response, ctx.throttle_ms)

    # -- throttling (KIP-219): the answer carries throttle_time_ms, then the connection reads nothing for
    # that long, as Kafka's SocketServer mutes a throttled channel; the client is expected to wait too.
    @staticmethod
    def _set_throttle_time(response: Any, throttle_ms: int) -> None:
        if response is not None and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = max(response.throttle_time_ms or 0, throttle_ms)

    def _mute(self, throttle_ms: int) -> None:
        if self._lost:
            return
        until = time.monotonic() + throttle_ms / 1000.0
        if until <= self._muted_until:
            return
        self._muted_until = until
        self._direct = False
        if self.transport is not None:
            self.transport.pause_reading()
        asyncio.get_running_loop().call_later(throttle_ms / 1000.0, self._unmute)

    def _unmute(self) -> None:
        if self._lost or time.monotonic() < self._muted_until - 0.001:
            return  # a later, longer throttle is still running
        self._muted_until = 0.0
        self._direct = not (self._draining or self._log_requests) and self._writable.is_set()
        if self.transport is not None and not self.state.should_pause() and not self._draining:
            self.transport.resume_reading()
        if not self._busy:
            self._pump()

    async def _call_hooked(self, ctx: RequestContext, request: Request) -> Any:
        hooks = self._hooks
        replaced = await hooks.run_before(ctx, request.body)
        if replaced is not None:
            return replaced
        response = self._handle(ctx, request)
        if inspect.isawaitable(response):
            response = await response
        return await hooks.run_after(ctx, request.body, response)

    def _handle(self, ctx: RequestContext, request: Request) -> Any:
        """The handler's answer, through the API's authorization guard when an authorizer is configured."""
        guards = self._guards
        if guards is not None:
            guard = guards.get(request.header.api_key)
            if guard is not None:
                return guard(ctx, request.body, request.spec.handler)
        return request.spec.handler(ctx, request.body)

    def _respond(self, request: Request, response: Any, started: float) -> None:
        self._metrics.request_done(request.spec.name, _error_code_of(response), time.perf_counter() - started)
        transport = self.transport
        # response None: no answer (Produce acks=0; a refused re-authentication); or the peer went away
        if response is not None and transport is not None and not transport.is_closing():
            transport.write(encode_response(request, response))
        if self.session.close_reason is not None:  # a failed authentication: Kafka's answer, then close
            self.queue.clear()
            self.close(self.session.close_reason)


# Answered before a client authenticates, or how it learns what to send: never throttled by request time
REQUEST_QUOTA_EXEMPT = frozenset((17, 18, 36))  # SaslHandshake, ApiVersions, SaslAuthenticate


class _TimedSteps:
    """Awaits `awaitable`, adding up the time its steps run (each send into it until it yields), so a request
    that waits for an fsync or a long poll is charged its own work only."""

    __slots__ = ("_awaitable", "seconds")

    def __init__(self, awaitable: Awaitable[Any], seconds: float) -> None:
        self._awaitable = awaitable
        self.seconds = seconds

    def __await__(self):
        steps = self._awaitable.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            begun = time.perf_counter()
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                self.seconds += time.perf_counter() - begun
                return done.value
            self.seconds += time.perf_counter() - begun
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # noqa: BLE001  (passed on to the awaitable, as await does)
                value, error = None, exc


def _error_code_of(response: Any) -> int:
    return int(getattr(response, "error_code", 0) or 0) if response is not None else 0


class KafkaServer:
    """Listeners and live connections; `stop` closes them in stages."""

    def __init__(self, broker: Broker, *, max_request_bytes: int, idle_ms: int,
                 high_water: int = 32, low_water: int = 8) -> None:
        self.broker = broker
        self.metrics = broker.metrics
        self.max_request_bytes = max_request_bytes
        self.idle_ms = idle_ms
        self.high_water = high_water
        self.low_water = low_water
        self.connections: set[KafkaConnection] = set()
        security = self.security = broker.security
        # With an authorizer every request passes its API's guard: no frame fast paths.
        self.guards = None
        if security.authorizer is not None:
            from kcoord.broker.security.authorize_apis import GUARDS

            self.guards = GUARDS
        self.frame_handlers = registry.frame_handlers() if self.guards is None else {}
        self._frame_paths = dict(self.frame_handlers)
        self.request_quota_changed()
        self.workers: set[asyncio.Task] = set()  # outlive their connection while a request finishes
        self.bound: list[BoundListener] = []
        self._seq = itertools.count()
        self.acceptors = Acceptors(broker.connection_quotas, self.metrics, self._limits_key, self._limits_of,
                                   self._connect, self._protocol_for)
        self._listener_limits: tuple[dict[str, int], dict[str, int]] = ({}, {})
        self._attaching: set[asyncio.Task[None]] = set()  # accepted sockets getting their transport

    def request_quota_changed(self) -> None:
        """With a request_percentage quota defined every request is timed on the general path: the frame
        fast paths are off (the dict every connection reads is emptied in place), on again without one."""
        self.frame_handlers.clear()
        if not self.broker.request_quota.active:
            self.frame_handlers.update(self._frame_paths)

    def session(self, listener: str) -> ConnectionSession:
        return self.security.session(listener)

    async def start(self, listeners: list[Any], serve: bool = True) -> list[BoundListener]:
        """Bind every listener; with `serve` False nothing is accepted until enable_request_processing()
        (a cluster node binds first, to register its ports, and serves once it has joined)."""
        config = self.broker.config
        for listener in listeners:
            port = await self.acceptors.bind(listener.name, listener.host, listener.port)
            self.bound.append(BoundListener(listener.name, listener.host, port))
            for key, limits in zip(("max.connections", "max.connection.creation.rate"), self._listener_limits,
                                   strict=True):
                name, value = setting(config, listener.name, key)
                if name != key:  # listener.name.<l>.<key> is set (static: Kafka's are dynamic per listener)
                    limits[listener.name] = value
        if serve:
            self.acceptors.start()
        return self.bound

    def _limits_key(self) -> LimitsKey:
        props = self.broker.config.props  # dynamic broker configs write the effective values here
        return (props["max.connections"], props["max.connection.creation.rate"], props["max.connections.per.ip"],
                props["max.connections.per.ip.overrides"])

    def _limits_of(self, key: LimitsKey, per_ip: dict[str, int]) -> ConnectionLimits:
        return ConnectionLimits(key[0], key[1], key[2], per_ip, *self._listener_limits)

    def _new_connection(self, listener: str) -> tuple[KafkaConnection, Any]:
        """A new KafkaConnection and the protocol the loop drives (under TLS the loop's SSL protocol, which
        serves the connection once its handshake is done)."""
        conn = KafkaConnection(self, listener, next(self._seq))
        self.connections.add(conn)
        return conn, (conn if conn._tls is None else tls_protocol(conn, conn._tls))

    def _protocol_for(self, listener: str) -> Any:
        """The loop's server's protocol factory (no connection limit set)."""
        return self._new_connection(listener)[1]

    def _connect(self, sock: socket.socket, listener: str, ip: str) -> None:
        """A socket the acceptor accepted (connection limits set) becomes a KafkaConnection, counted under `ip`."""
        conn, protocol = self._new_connection(listener)
        conn.counted_ip = ip
        task = asyncio.get_running_loop().create_task(self._attach(conn, sock, protocol))
        self._attaching.add(task)
        task.add_done_callback(self._attaching.discard)

    async def _attach(self, conn: KafkaConnection, sock: socket.socket, protocol: Any) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: protocol, sock)
        except Exception as exc:  # noqa: BLE001  (the peer went away before its transport was made)
            log.info("could not set up connection from %s: %s", conn.counted_ip, exc)
            sock.close()
            self.connection_ended(conn)

    def connection_ended(self, conn: KafkaConnection) -> None:
        self.connections.discard(conn)
        if conn.counted_ip is not None:
            self.acceptors.closed(conn.listener, conn.counted_ip)
            conn.counted_ip = None

    async def enable_request_processing(self) -> None:
        """Start accepting on listeners bound with serve=False (Kafka's SocketServer.enableRequestProcessing)."""
        self.acceptors.start()

    async def stop(self, timeout: float) -> None:
        await self.acceptors.close()  # stop accepting
        if self._attaching:  # just accepted: connected first, then drained like the others
            await asyncio.wait(self._attaching, timeout=1.0)
        conns = list(self.connections)
        for conn in conns:
            conn.drain_and_close()
        if conns:
            _done, pending = await asyncio.wait([c.closed for c in conns], timeout=timeout)
            for conn in conns:
                if not conn.closed.done():
                    log.warning("connection %s still busy after %.1fs; aborting it", conn.connection_id, timeout)
                    if conn.transport is not None:
                        conn.transport.abort()
        # Past the deadline, requests still being served (e.g. a JoinGroup waiting for its
        # rebalance) are cancelled; nobody is left to answer.
        workers = list(self.workers)
        for worker in workers:
            worker.cancel()
        if workers:
            await asyncio.wait(workers, timeout=1.0)
