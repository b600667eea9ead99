"""LocalStore: the metadata store in one process, with etcd v3's revision semantics.

Single-node mode runs on it (the node is the permanent controller), and unit tests do. It keeps what
etcd keeps, the way etcd keeps it: one revision counter that a write txn moves by one however many
keys it changes (a txn that changes nothing leaves it), per key the creating and last-modifying
revision and a version that a delete resets, leases whose expiry deletes their keys in one revision,
and the history of changes for watches to replay, compacted on request or beyond `history_limit`
revisions (etcd's auto-compaction), so the Compacted path is real.

Time comes from an injected timer (kcoord.coordinator.timers.Timer): a lease expires when its timer
fires, a ManualClock's `sleep` in tests, the event loop's timer in a node. A lease being kept alive
never expires; when its keep_alive stops it has its full TTL left, as an etcd lease just refreshed.
No I/O: watchers are asyncio queues.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import operator
from collections.abc import AsyncIterator, Sequence

from kcoord.coordinator.timers import Timer
from kcoord.metadata.store import (
    Compacted,
    Compare,
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
    TxnResult,
    WatchEvent,
    check_branch,
)

_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}
_TIMER_KEY = "kcoord.metadata.lease"


@dataclasses.dataclass(eq=False)
class _LeaseState:
    ttl_s: int
    keys: set[str] = dataclasses.field(default_factory=set)
    holders: int = 0  # keep_alive calls running: while any runs, the lease does not expire
    waiting: set[asyncio.Future[None]] = dataclasses.field(default_factory=set)


@dataclasses.dataclass(eq=False)
class _Watcher:
    prefix: str
    queue: asyncio.Queue[list[WatchEvent] | StoreError]


class LocalStore:
    def __init__(self, *, timer: Timer, history_limit: int = 10_000) -> None:
        self._timer = timer
        self._history_limit = history_limit
        self._revision = 1  # etcd's first revision, before any write
        self._compact_revision = 0
        self._kvs: dict[str, KeyValue] = {}
        self._history: collections.deque[tuple[int, list[WatchEvent]]] = collections.deque()
        self._leases: dict[int, _LeaseState] = {}
        self._lease_ids = itertools.count(1)
        self._watchers: set[_Watcher] = set()
        self._closed = False

    @property
    def revision(self) -> int:
        return self._revision

    # --- reads

    async def get(self, key: str) -> KeyValue | None:
        self._check_open()
        return self._kvs.get(key)

    async def range(self, prefix: str) -> RangeResult:
        self._check_open()
        return RangeResult(self._revision, self._read(prefix, prefix=True))

    def _read(self, key: str, *, prefix: bool) -> tuple[KeyValue, ...]:
        if not prefix:
            kv = self._kvs.get(key)
            return () if kv is None else (kv,)
        return tuple(self._kvs[k] for k in sorted(k for k in self._kvs if k.startswith(key)))

    # --- transactions

    async def txn(self, compares: Sequence[Compare], on_success: Sequence[Op],
                  on_failure: Sequence[Op] = ()) -> TxnResult:
        self._check_open()
        succeeded = all(self._holds(c) for c in compares)
        ops = on_success if succeeded else on_failure
        check_branch(ops)
        for op in ops:
            if isinstance(op, Put) and op.lease and op.lease not in self._leases:
                raise LeaseNotFound(op.lease)
        revision = self._revision + 1  # every write of this txn lands at it
        events: list[WatchEvent] = []
        responses: list[OpResult] = []
        for op in ops:
            if isinstance(op, Get):
                responses.append(self._read(op.key, prefix=op.prefix))
            elif isinstance(op, Put):
                events.append(self._put(op, revision))
                responses.append(None)
            else:
                deleted = [self._delete(kv.key, revision) for kv in self._read(op.key, prefix=op.prefix)]
                events.extend(deleted)
                responses.append(len(deleted))
        if events:
            self._commit(revision, events)
        return TxnResult(succeeded, self._revision, tuple(responses))

    def _holds(self, c: Compare) -> bool:
        kv = self._kvs.get(c.key)
        if c.target == "value":
            if kv is None:
                return False  # etcd: a value compare on a missing key fails, whatever the operator
            actual: int | bytes = kv.value
        elif kv is None:
            actual = 0
        else:
            actual = {"create": kv.create_revision, "mod": kv.mod_revision, "version": kv.version}[c.target]
        return _COMPARE[c.op](actual, c.operand)

    def _put(self, op: Put, revision: int) -> WatchEvent:
        prev = self._kvs.get(op.key)
        if prev is not None and prev.lease:
            self._leases[prev.lease].keys.discard(op.key)
        kv = KeyValue(op.key, op.value, prev.create_revision if prev else revision, revision,
                      prev.version + 1 if prev else 1, op.lease)
        self._kvs[op.key] = kv
        if op.lease:
            self._leases[op.lease].keys.add(op.key)
        return WatchEvent("put", kv.key, kv.value, kv.create_revision, revision, kv.version, prev)

    def _delete(self, key: str, revision: int) -> WatchEvent:
        prev = self._kvs.pop(key)
        if prev.lease:
            self._leases[prev.lease].keys.discard(key)
        return WatchEvent("delete", key, b"", 0, revision, 0, prev)

    def _commit(self, revision: int, events: list[WatchEvent]) -> None:
        self._revision = revision
        self._history.append((revision, events))
        while len(self._history) > self._history_limit:
            self._history.popleft()
            self._compact_revision = self._history[0][0]
        for watcher in self._watchers:
            mine = [e for e in events if e.key.startswith(watcher.prefix)]
            if mine:
                watcher.queue.put_nowait(mine)

    # --- leases

    async def grant_lease(self, ttl_s: int) -> Lease:
        self._check_open()
        if ttl_s < 1:
            raise ValueError(f"a lease's TTL is at least 1 s, got {ttl_s}")
        lease_id = next(self._lease_ids)
        self._leases[lease_id] = _LeaseState(ttl_s)
        self._arm(lease_id)
        return Lease(lease_id, ttl_s)

    async def keep_alive(self, lease_id: int) -> None:
        state = self._leases.get(lease_id)
        if state is None:
            raise LeaseLost(lease_id)
        state.holders += 1
        self._timer.cancel((_TIMER_KEY, lease_id))
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        state.waiting.add(lost)
        try:
            await lost  # completes only with the lease's loss (or the store's close)
        finally:
            state.waiting.discard(lost)
            state.holders -= 1
            if state.holders == 0 and self._leases.get(lease_id) is state:
                self._arm(lease_id)

    async def revoke_lease(self, lease_id: int) -> None:
        self._check_open()
        if lease_id in self._leases:
            self._drop_lease(lease_id)

    def _arm(self, lease_id: int) -> None:
        ttl_ms = self._leases[lease_id].ttl_s * 1000
        self._timer.schedule((_TIMER_KEY, lease_id), ttl_ms, lambda: self._expire(lease_id))

    def _expire(self, lease_id: int) -> None:
        state = self._leases.get(lease_id)
        if state is not None and state.holders == 0 and not self._closed:
            self._drop_lease(lease_id)

    def _drop_lease(self, lease_id: int) -> None:
        """Expiry or revocation: the lease's keys go in one revision, then its keepers learn it."""
        state = self._leases[lease_id]
        self._timer.cancel((_TIMER_KEY, lease_id))
        if state.keys:
            revision = self._revision + 1
            self._commit(revision, [self._delete(key, revision) for key in sorted(state.keys)])
        del self._leases[lease_id]
        for lost in state.waiting:
            if not lost.done():
                lost.set_exception(LeaseLost(lease_id))

    # --- watches and history

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[list[WatchEvent]]:
        self._check_open()
        if start_revision < 1:
            raise ValueError(f"watch from revision 1 or later, got {start_revision}")
        if start_revision < self._compact_revision:
            raise Compacted(self._compact_revision)
        watcher = _Watcher(prefix, asyncio.Queue())
        first = self._history[0][0] if self._history else self._revision + 1
        for _, events in itertools.islice(self._history, max(0, start_revision - first), None):
            mine = [e for e in events if e.key.startswith(prefix)]
            if mine:
                watcher.queue.put_nowait(mine)
        self._watchers.add(watcher)
        try:
            while True:
                item = await watcher.queue.get()
                if isinstance(item, StoreError):
                    raise item
                yield item
        finally:
            self._watchers.discard(watcher)

    async def compact(self, revision: int) -> None:
        self._check_open()
        if revision > self._revision:
            raise ValueError(f"cannot compact at {revision}: the store is at revision {self._revision}")
        if revision <= self._compact_revision:
            raise Compacted(self._compact_revision)
        while self._history and self._history[0][0] < revision:
            self._history.popleft()
        self._compact_revision = revision

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for lease_id in list(self._leases):
            self._timer.cancel((_TIMER_KEY, lease_id))
            for lost in self._leases[lease_id].waiting:
                if not lost.done():
                    lost.set_exception(StoreError("the metadata store is closed"))
        for watcher in self._watchers:
            watcher.queue.put_nowait(StoreError("the metadata store is closed"))

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the metadata store is closed")
