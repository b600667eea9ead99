"""LocalStore's own parts: time from the injected timer, history bounded like etcd's auto-compaction,
close. (What it shares with etcd is in test_store_contract.py.)"""
import asyncio
import contextlib

import pytest

from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.store import Compacted, Put, StoreError


async def test_a_lease_expires_exactly_at_its_ttl_after_its_keeper_stops():
    clock = ManualClock()
    store = LocalStore(timer=clock.timers)
    lease = await store.grant_lease(9)
    await store.txn([], [Put("brokers/ids/1", b"{}", lease.id)])
    clock.sleep(8_999)
    assert await store.get("brokers/ids/1") is not None
    keeper = asyncio.create_task(store.keep_alive(lease.id))
    await asyncio.sleep(0)
    clock.sleep(60_000)  # kept alive: time does not count
    keeper.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await keeper
    clock.sleep(8_999)  # a full TTL from when the keeper stopped
    assert await store.get("brokers/ids/1") is not None
    clock.sleep(1)
    assert await store.get("brokers/ids/1") is None


async def test_history_beyond_the_limit_is_compacted():
    store = LocalStore(timer=ManualClock().timers, history_limit=3)
    revisions = [(await store.txn([], [Put("k", str(i).encode())])).revision for i in range(5)]
    with pytest.raises(Compacted) as info:
        await anext(store.watch("", revisions[1]))
    assert info.value.compact_revision == revisions[2]
    async with contextlib.aclosing(store.watch("", revisions[2])) as watch:
        assert [(await anext(watch))[0].value for _ in range(3)] == [b"2", b"3", b"4"]


async def test_close_ends_watches_and_keepers():
    store = LocalStore(timer=ManualClock().timers)
    lease = await store.grant_lease(5)
    keeper = asyncio.create_task(store.keep_alive(lease.id))
    watch = store.watch("", 1)
    waiting = asyncio.create_task(anext(watch))
    await asyncio.sleep(0)
    await store.close()
    for task in (keeper, waiting):
        with pytest.raises(StoreError, match="closed"):
            await asyncio.wait_for(task, 1)
    with pytest.raises(StoreError, match="closed"):
        await store.get("k")
