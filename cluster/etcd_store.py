"""EtcdStore: the metadata store (kcoord.metadata.store) on etcd v3, through aetcd's gRPC client.

aetcd (grpc.aio) supplies the connection and the generated etcd stubs; the calls are made on the stubs
directly where aetcd's helpers lose what the interface promises:
- a txn's header revision (aetcd's `transaction` returns only the op responses);
- keepalive: aetcd's `refresh_lease` opens a stream per refresh; here each `keep_alive` holds ONE
  LeaseKeepAlive stream on the client's lease stub and refreshes on it every TTL/3, reopening it
  (quickly, the lease's time is running) when it breaks;
- watches: one Watch stream per `watch`, with prev_kv, grouped by revision, resumed from the revision
  after the last one delivered when the stream breaks (etcd down, member restarted), so a caller sees
  every change once and in order, or Compacted.
Endpoints: aetcd builds its channel target as `f"{host}:{port}"`; several IP endpoints are handed to it
as gRPC's multi-address target (`ipv4:a:p1,b:p2`, pick_first: the channel moves to the next member when
its member goes away). Several endpoints with host names are resolved once, when connecting.

Keys are `<prefix>/<key>` in etcd (kcoord.etcd.connect's prefix); callers see `<key>`.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Sequence

import aetcd
import grpc
from aetcd import rpc

from kcoord.cluster.etcd_connect import EtcdConnect, grpc_target
from kcoord.metadata.store import (
    Compacted,
    Compare,
    Delete,
    Get,
    KeyValue,
    Lease,
    LeaseLost,
    LeaseNotFound,
    Op,
    OpResult,
    Put,
    RangeResult,
    StoreError,
    StoreUnavailable,
    TxnResult,
    WatchEvent,
    check_branch,
)

log = logging.getLogger("kcoord.cluster.etcd")

_TARGET = {"create": rpc.Compare.CREATE, "mod": rpc.Compare.MOD, "version": rpc.Compare.VERSION,
           "value": rpc.Compare.VALUE}
_FIELD = {"create": "create_revision", "mod": "mod_revision", "version": "version", "value": "value"}
_RESULT = {"==": rpc.Compare.EQUAL, "!=": rpc.Compare.NOT_EQUAL, "<": rpc.Compare.LESS,
           ">": rpc.Compare.GREATER}
# Errors no retry cures; anything else breaking a stream is taken as etcd being away for a while.
_PERMANENT = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED,
              grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED,
              grpc.StatusCode.FAILED_PRECONDITION}
_UNAVAILABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
CHANNEL_OPTIONS = {
    # find a dead connection (member paused, link cut) on an idle watch; etcd refuses pings < 5 s apart
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.max_receive_message_length": 64 * 1024 * 1024,  # a whole cluster's metadata in one range
    # see etcd back within a second (gRPC's default backoff grows to 120 s)
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1_000,
}


def prefix_end(key: bytes) -> bytes:
    """etcd's range end for "every key starting with `key`" (aetcd.utils.prefix_range_end, and b"\\0"
    = to the end of the keyspace for an empty or all-0xff key)."""
    end = bytearray(key)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


class _Backoff:
    def __init__(self, first_s: float = 0.05, most_s: float = 1.0) -> None:
        self._first, self._most, self._next = first_s, most_s, first_s

    def reset(self) -> None:
        self._next = self._first

    def next(self) -> float:
        delay, self._next = self._next, min(self._most, self._next * 2)
        return delay


class EtcdStore:
    def __init__(self, connect: EtcdConnect, *, timeout_s: float = 5.0) -> None:
        self.connect = connect
        self._ns = connect.namespace
        self._timeout_s = timeout_s
        self._client: aetcd.Client | None = None
        self._granted: dict[int, int] = {}  # lease id -> granted TTL, for the keepalive interval

    @classmethod
    async def open(cls, connect: EtcdConnect, *, timeout_s: float = 5.0) -> EtcdStore:
        """A store on `connect`'s endpoints. gRPC connects on the first call: an unreachable etcd shows
        as StoreUnavailable there, not here."""
        store = cls(connect, timeout_s=timeout_s)
        target = grpc_target(connect.endpoints) or await _resolve(connect.endpoints)
        host, _, port = target.rpartition(":")  # aetcd joins them again as f"{host}:{port}"
        store._client = aetcd.Client(host=host, port=int(port), timeout=timeout_s, options=CHANNEL_OPTIONS)
        await store._client.connect()
        return store

    @property
    def _c(self) -> aetcd.Client:
        if self._client is None:
            raise StoreError("the metadata store is closed")
        return self._client

    def _key(self, key: str) -> bytes:
        return (self._ns + key).encode()

    def _kv(self, kv) -> KeyValue:
        return KeyValue(kv.key.decode()[len(self._ns):], kv.value, kv.create_revision, kv.mod_revision,
                        kv.version, kv.lease)

    async def _unary(self, method, request):
        """One call; while etcd is away it waits for the channel (as etcd's Go client does) up to the
        timeout, then StoreUnavailable."""
        try:
            return await method(request, timeout=self._timeout_s, wait_for_ready=True)
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from exc

    # --- reads

    async def get(self, key: str) -> KeyValue | None:
        reply = await self._unary(self._c.kvstub.Range, rpc.RangeRequest(key=self._key(key)))
        return self._kv(reply.kvs[0]) if reply.kvs else None

    async def range(self, prefix: str) -> RangeResult:
        key = self._key(prefix)
        reply = await self._unary(self._c.kvstub.Range, rpc.RangeRequest(key=key, range_end=prefix_end(key)))
        return RangeResult(reply.header.revision, tuple(self._kv(kv) for kv in reply.kvs))

    # --- transactions

    async def txn(self, compares: Sequence[Compare], on_success: Sequence[Op],
                  on_failure: Sequence[Op] = ()) -> TxnResult:
        check_branch(on_success)
        check_branch(on_failure)
        request = rpc.TxnRequest(compare=[self._compare(c) for c in compares],
                                 success=[self._op(op) for op in on_success],
                                 failure=[self._op(op) for op in on_failure])
        try:
            reply = await self._unary(self._c.kvstub.Txn, request)
        except LeaseNotFound:
            lease = next(op.lease for op in (*on_success, *on_failure) if isinstance(op, Put) and op.lease)
            raise LeaseNotFound(lease) from None
        responses: list[OpResult] = []
        for response in reply.responses:
            kind = response.WhichOneof("response")
            if kind == "response_range":
                responses.append(tuple(self._kv(kv) for kv in response.response_range.kvs))
            elif kind == "response_delete_range":
                responses.append(response.response_delete_range.deleted)
            else:
                responses.append(None)
        return TxnResult(reply.succeeded, reply.header.revision, tuple(responses))

    def _compare(self, c: Compare) -> rpc.Compare:
        return rpc.Compare(key=self._key(c.key), target=_TARGET[c.target], result=_RESULT[c.op],
                           **{_FIELD[c.target]: c.operand})

    def _op(self, op: Op) -> rpc.RequestOp:
        key = self._key(op.key)
        if isinstance(op, Put):
            return rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=op.value, lease=op.lease))
        end = prefix_end(key) if op.prefix else b""
        if isinstance(op, Delete):
            return rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key, range_end=end))
        assert isinstance(op, Get)
        return rpc.RequestOp(request_range=rpc.RangeRequest(key=key, range_end=end))

    # --- leases

    async def grant_lease(self, ttl_s: int) -> Lease:
        if ttl_s < 1:
            raise ValueError(f"a lease's TTL is at least 1 s, got {ttl_s}")
        reply = await self._unary(self._c.leasestub.LeaseGrant, rpc.LeaseGrantRequest(TTL=ttl_s))
        if reply.error:
            raise StoreError(f"etcd refused a lease: {reply.error}")
        self._granted[reply.ID] = reply.TTL
        return Lease(reply.ID, reply.TTL)

    async def keep_alive(self, lease_id: int) -> None:
        ttl = self._granted.get(lease_id)
        if ttl is None:
            info = await self._unary(self._c.leasestub.LeaseTimeToLive, rpc.LeaseTimeToLiveRequest(ID=lease_id))
            if info.TTL <= 0:
                raise LeaseLost(lease_id)
            ttl = info.grantedTTL
        interval = ttl / 3
        backoff = _Backoff(most_s=min(1.0, interval))
        while True:
            call = self._c.leasestub.LeaseKeepAlive()
            try:
                while True:
                    await call.write(rpc.LeaseKeepAliveRequest(ID=lease_id))
                    reply = await asyncio.wait_for(call.read(), self._timeout_s)
                    if reply is grpc.aio.EOF:
                        raise StoreUnavailable("etcd ended the keepalive stream")
                    if reply.TTL <= 0:
                        self._granted.pop(lease_id, None)
                        raise LeaseLost(lease_id)
                    backoff.reset()
                    await asyncio.sleep(interval)
            except grpc.aio.AioRpcError as exc:
                if exc.code() in _PERMANENT:
                    raise _error(exc) from exc
                log.warning("lease %#x: keepalive stream broke (%s); reopening", lease_id, exc.code().name)
            except (TimeoutError, StoreUnavailable, asyncio.InvalidStateError) as exc:
                # no answer in time, or the stream ended (a write on a finished call: InvalidStateError)
                log.warning("lease %#x: keepalive stream lost (%s); reopening", lease_id, exc or "timed out")
            finally:
                call.cancel()
            await asyncio.sleep(backoff.next())

    async def revoke_lease(self, lease_id: int) -> None:
        try:
            await self._unary(self._c.leasestub.LeaseRevoke, rpc.LeaseRevokeRequest(ID=lease_id))
        except LeaseNotFound:
            pass  # gone already: what revoking wanted
        self._granted.pop(lease_id, None)

    # --- watches and history

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[list[WatchEvent]]:
        if start_revision < 1:
            raise ValueError(f"watch from revision 1 or later, got {start_revision}")
        key = self._key(prefix)
        create = rpc.WatchCreateRequest(key=key, range_end=prefix_end(key), prev_kv=True)
        next_revision = start_revision
        backoff = _Backoff()
        while True:
            call = rpc.WatchStub(self._c.channel).Watch()
            try:
                create.start_revision = next_revision
                await call.write(rpc.WatchRequest(create_request=create))
                while True:
                    reply = await call.read()
                    if reply is grpc.aio.EOF:
                        raise StoreUnavailable("etcd ended the watch stream")
                    if reply.compact_revision:
                        raise Compacted(reply.compact_revision)
                    if reply.canceled:
                        raise StoreUnavailable(f"etcd cancelled the watch: {reply.cancel_reason}")
                    for batch in self._by_revision(reply.events):
                        next_revision = batch[0].mod_revision + 1
                        yield batch
                    backoff.reset()
            except grpc.aio.AioRpcError as exc:
                if exc.code() in _PERMANENT:
                    raise _error(exc) from exc
                log.info("watch %r: stream broke (%s); resuming at revision %d",
                         prefix, exc.code().name, next_revision)
            except (StoreUnavailable, asyncio.InvalidStateError) as exc:
                log.info("watch %r: %s; resuming at revision %d", prefix, exc, next_revision)
            finally:
                call.cancel()
            await asyncio.sleep(backoff.next())

    def _by_revision(self, events) -> list[list[WatchEvent]]:
        batches: list[list[WatchEvent]] = []
        for e in events:
            kv = e.kv
            prev = self._kv(e.prev_kv) if e.HasField("prev_kv") else None
            if e.type == rpc.Event.DELETE:
                event = WatchEvent("delete", kv.key.decode()[len(self._ns):], b"", 0, kv.mod_revision, 0, prev)
            else:
                event = WatchEvent("put", kv.key.decode()[len(self._ns):], kv.value, kv.create_revision,
                                   kv.mod_revision, kv.version, prev)
            if batches and batches[-1][0].mod_revision == event.mod_revision:
                batches[-1].append(event)
            else:
                batches.append([event])
        return batches

    async def compact(self, revision: int) -> None:
        try:
            await self._unary(self._c.kvstub.Compact, rpc.CompactionRequest(revision=revision))
        except StoreError as exc:
            if "future revision" in str(exc):
                raise ValueError(f"cannot compact at {revision}: {exc}") from None
            if "compacted" in str(exc):
                raise Compacted(revision) from None
            raise

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def _error(exc: grpc.aio.AioRpcError) -> StoreError:
    details = exc.details() or exc.code().name
    if exc.code() in _UNAVAILABLE:
        return StoreUnavailable(f"etcd: {details}")
    if exc.code() == grpc.StatusCode.NOT_FOUND and "lease not found" in details:
        return LeaseNotFound(0)  # the caller knows which lease
    return StoreError(f"etcd: {exc.code().name}: {details}")


async def _resolve(endpoints: tuple[tuple[str, int], ...]) -> str:
    """A multi-address gRPC target for endpoints that include host names: each resolved now, IPv4 if
    every one has an IPv4 address, else IPv6."""
    loop = asyncio.get_running_loop()
    found: list[dict[int, str]] = []
    for host, port in endpoints:
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise StoreUnavailable(f"cannot resolve etcd endpoint {host}: {exc}") from None
        by_family: dict[int, str] = {}
        for family, _, _, _, sockaddr in infos:
            by_family.setdefault(family, sockaddr[0])
        found.append(by_family)
    for family, scheme, fmt in ((socket.AF_INET, "ipv4", "{}:{}"), (socket.AF_INET6, "ipv6", "[{}]:{}")):
        if all(family in f for f in found):
            return scheme + ":" + ",".join(fmt.format(f[family], port) for f, (_, port) in zip(found, endpoints, strict=True))
    raise StoreUnavailable("the etcd endpoints do not all resolve to one address family")
