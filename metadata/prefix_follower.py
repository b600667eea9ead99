"""A node's copy of every key under one prefix of the metadata store, kept current by snapshot + watch
(as a Kafka 4 broker follows its metadata log, and as ZooKeeper-era brokers watched `/config` and
`/kafka-acl`): what cluster-wide state that is not partition state (ACLs, SCRAM credentials, ...) is
followed with. On Compacted it reads a new snapshot. `on_change(values)` runs after every applied batch
with the whole current mapping (key relative to the prefix -> value); it must not block.

`start()` runs the follower's task and returns once the first snapshot is applied; `close()` ends it.
Read-your-writes: a node that wrote at revision R waits `see_own_write(R)` before it answers, so the
client that made the change sees it on this node at once (other nodes see it as their watch delivers it).
A change computed from the copy (an incremental config change) is written with `write_on_copy`: only if
nobody changed the key since the copy, so two nodes changing one resource at once cannot lose one change
(Kafka's controller applies such changes one at a time; etcd's compare-and-set gives the same here).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

from kcoord.metadata.store import Compacted, Get, MetadataStore, Op, StoreError, present, unchanged_since

log = logging.getLogger("kcoord.metadata.follow")

RETRY_S = 0.5  # after the store did not answer (a broken watch stream resumes by itself)
SEE_OWN_WRITE_TIMEOUT_S = 5.0


class StaleCopy(Exception):
    """Another writer changed the key after the copy a write was computed from; the copy has caught up with
    that change, so the caller computes its change again from it."""


class PrefixFollower:
    def __init__(self, store: MetadataStore, prefix: str, on_change: Callable[[Mapping[str, bytes]], None]) -> None:
        self._store = store
        self.prefix = prefix
        self._on_change = on_change
        self.values: dict[str, bytes] = {}
        self.revision = 0  # the store revision the values are at (0: no snapshot yet)
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name=f"{self.prefix}follower")
        await self.wait_for(1)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def run(self) -> None:
        """The follower's task: snapshot, then watch, until cancelled."""
        while True:
            try:
                snapshot = await self._store.range(self.prefix)
            except StoreError as exc:  # unreachable for now: the copy stays as it is, and is read again
                log.warning("reading %s failed (%s); again in %.1f s", self.prefix, exc, RETRY_S)
                await asyncio.sleep(RETRY_S)
                continue
            self.values = {kv.key[len(self.prefix):]: kv.value for kv in snapshot.kvs}
            self._publish(snapshot.revision)
            try:
                async with contextlib.aclosing(self._store.watch(self.prefix, snapshot.revision + 1)) as watch:
                    async for batch in watch:
                        for event in batch:
                            key = event.key[len(self.prefix):]
                            if event.type == "put":
                                self.values[key] = event.value
                            else:
                                self.values.pop(key, None)
                        self._publish(max(e.mod_revision for e in batch))
            except Compacted as exc:
                log.info("%s history compacted (from revision %d): reading a new snapshot", self.prefix,
                         exc.compact_revision)
            except StoreError as exc:  # what the watch could not resume by itself: start over
                log.warning("watching %s failed (%s); reading a new snapshot in %.1f s", self.prefix, exc, RETRY_S)
                await asyncio.sleep(RETRY_S)

    def _publish(self, revision: int) -> None:
        self.revision = max(self.revision, revision)
        try:
            self._on_change(self.values)
        except Exception:  # a bad value must not stop the follower: the rest stays current
            log.exception("applying %s at revision %d failed", self.prefix, revision)
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, revision: int) -> None:
        """Until the values include every change up to `revision`."""
        while self.revision < revision:
            await self._changed.wait()

    async def see_own_write(self, revision: int, timeout_s: float = SEE_OWN_WRITE_TIMEOUT_S) -> None:
        """wait_for(revision), at most `timeout_s`: the write is made either way (a late copy is logged)."""
        try:
            await asyncio.wait_for(self.wait_for(revision), timeout_s)
        except TimeoutError:
            log.warning("%s at revision %d not seen here within %.0f s", self.prefix, revision, timeout_s)

    async def write_on_copy(self, key_name: str, op: Op) -> None:
        """Write `op` to the key `key_name` (relative to the prefix) if the store's key is still as this copy has
        it, then answer once the copy has the write. The caller computed `op` from the copy and has not awaited
        since (the copy's revision is read here, before the first await). StaleCopy: not written."""
        key = self.prefix + key_name
        compares = [unchanged_since(key, self.revision)] + ([present(key)] if key_name in self.values else [])
        result = await self._store.txn(compares, [op], [Get(key)])
        if result.succeeded:
            await self.see_own_write(result.revision)
            return
        (now,) = result.responses
        if isinstance(now, tuple) and now:
            await self.see_own_write(now[0].mod_revision)
        else:  # deleted since the copy: wait for the copy to drop it
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._until_absent(key_name), SEE_OWN_WRITE_TIMEOUT_S)
        raise StaleCopy(key)

    async def _until_absent(self, key_name: str) -> None:
        while key_name in self.values:
            await self._changed.wait()
