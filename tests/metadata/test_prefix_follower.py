"""PrefixFollower: a node's copy of one prefix, by snapshot + watch, a new snapshot when the history it
would watch from is compacted away (as etcd answers a watch from a compacted revision)."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.prefix_follower import PrefixFollower
from kcoord.metadata.store import Compacted, Delete, Put, WatchEvent


class CompactedOnce:
    """A LocalStore whose first watch finds its start revision compacted."""

    def __init__(self, store: LocalStore) -> None:
        self.store = store
        self.compactions = 0

    async def range(self, prefix: str):
        return await self.store.range(prefix)

    def watch(self, prefix: str, start_revision: int) -> AsyncIterator[list[WatchEvent]]:
        if self.compactions == 0:
            self.compactions += 1
            return self._compacted(start_revision)
        return self.store.watch(prefix, start_revision)

    async def _compacted(self, revision: int) -> AsyncIterator[list[WatchEvent]]:
        raise Compacted(revision + 1)
        yield []  # an async generator


async def test_follows_puts_and_deletes_under_its_prefix_only_and_resnapshots_after_compaction():
    store = LocalStore(timer=ManualClock().timers)
    await store.txn([], [Put("acls/a", b"1"), Put("other", b"x")])
    seen: list[dict[str, bytes]] = []
    follower = PrefixFollower(CompactedOnce(store), "acls/", lambda values: seen.append(dict(values)))  # type: ignore[arg-type]
    task = asyncio.create_task(follower.run())
    await follower.wait_for(1)
    assert follower.values == {"a": b"1"}
    result = await store.txn([], [Put("acls/b", b"2"), Delete("acls/a"), Put("other", b"y")])
    await asyncio.wait_for(follower.wait_for(result.revision), 5)
    assert follower.values == {"b": b"2"}
    assert seen[0] == {"a": b"1"} and seen[-1] == {"b": b"2"}
    assert len(seen) >= 3  # the snapshot, the snapshot again after Compacted, the change
    task.cancel()
