"""The metadata store's contract: each test runs on LocalStore and on EtcdStore against a real etcd
(tests/metadata/conftest.py), so single-node mode and unit tests stand on what etcd really does.

Revisions are only compared with each other: etcd's counter is shared by every namespace."""
from __future__ import annotations

import asyncio
import contextlib

import pytest

from kcoord.metadata.store import (
    Compacted,
    Compare,
    Delete,
    Get,
    LeaseLost,
    LeaseNotFound,
    Put,
    absent,
    created_at,
    modified_at,
    present,
)

SLOW_ON_ETCD = pytest.mark.parametrize(
    "store_backend", ["local", pytest.param("etcd", marks=pytest.mark.slow)], indirect=True)


async def put(store, key, value, lease=0):
    return (await store.txn([], [Put(key, value, lease)])).revision


async def next_batch(watch, timeout=5.0):
    return await asyncio.wait_for(anext(watch), timeout)


def summary(batch):
    return [(e.type, e.key, e.value, e.mod_revision) for e in batch]


async def test_revisions_count_writes_and_keys_carry_create_mod_and_version(store_backend):
    store = store_backend.store
    r0 = (await store.range("")).revision
    assert await put(store, "a", b"1") == r0 + 1
    assert await put(store, "a", b"2") == r0 + 2
    kv = await store.get("a")
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"2", r0 + 1, r0 + 2, 2)

    both = await store.txn([], [Put("b", b"x"), Put("c", b"y")])  # one txn, one revision
    assert both.revision == r0 + 3
    assert {(await store.get(k)).mod_revision for k in "bc"} == {r0 + 3}

    gone = await store.txn([], [Delete("a")])
    assert (gone.revision, gone.responses) == (r0 + 4, (1,))
    assert await store.get("a") is None
    nothing = await store.txn([], [Delete("a"), Get("b")])  # changes nothing: the revision stays
    assert nothing.revision == r0 + 4
    assert [kv.value for kv in nothing.responses[1]] == [b"x"]

    await put(store, "a", b"3")  # a new incarnation: created again, version from 1
    kv = await store.get("a")
    assert (kv.create_revision, kv.mod_revision, kv.version) == (r0 + 5, r0 + 5, 1)


async def test_create_if_absent_succeeds_once(store_backend):
    store = store_backend.store
    first = await store.txn([absent("controller")], [Put("controller", b'{"node_id": 1}')], [Get("controller")])
    assert first.succeeded and first.responses == (None,)
    second = await store.txn([absent("controller")], [Put("controller", b'{"node_id": 2}')], [Get("controller")])
    assert not second.succeeded and second.revision == first.revision
    (holder,) = second.responses[0]
    assert (holder.value, holder.create_revision) == (b'{"node_id": 1}', first.revision)
    # the holder's later writes compare its epoch, the key's create revision
    assert (await store.txn([created_at("controller", first.revision)], [Put("x", b"1")])).succeeded
    assert not (await store.txn([created_at("controller", first.revision - 1)], [Put("x", b"2")])).succeeded


async def test_compare_and_set_on_mod_revision(store_backend):
    store = store_backend.store
    await put(store, "topics/t/p/0", b'{"leader": 1, "leader_epoch": 0}')
    read = await store.get("topics/t/p/0")
    won = await store.txn([modified_at(read.key, read.mod_revision)], [Put(read.key, b'{"leader": 2, "leader_epoch": 1}')])
    assert won.succeeded and won.revision == read.mod_revision + 1
    lost = await store.txn([modified_at(read.key, read.mod_revision)], [Put(read.key, b'{"leader": 3, "leader_epoch": 1}')])
    assert not lost.succeeded and lost.revision == won.revision  # refused, nothing written
    assert (await store.get(read.key)).value == b'{"leader": 2, "leader_epoch": 1}'


async def test_compares_on_value_version_and_missing_keys(store_backend):
    store = store_backend.store
    # a missing key: create = mod = version = 0, and any compare on its value fails
    assert (await store.txn([Compare("nope", "version", "==", 0), absent("nope")], [])).succeeded
    assert not (await store.txn([Compare("nope", "value", "!=", b"x")], [])).succeeded
    assert not (await store.txn([present("nope")], [])).succeeded
    await put(store, "k", b"m")
    await put(store, "k", b"n")
    assert (await store.txn([Compare("k", "value", "==", b"n"), Compare("k", "version", "==", 2),
                             Compare("k", "value", ">", b"m"), present("k")], [])).succeeded
    assert not (await store.txn([Compare("k", "value", "==", b"m")], [])).succeeded
    # one failing compare among several fails the txn (the KIP-841 check: every added replica registered)
    assert not (await store.txn([present("k"), present("brokers/ids/9")], [Put("k", b"o")])).succeeded


async def test_range_reads_a_prefix_sorted_at_one_revision(store_backend):
    store = store_backend.store
    await store.txn([], [Put("topics/b", b"2"), Put("topics/a", b"1"), Put("topics/a/p/0", b"3"),
                         Put("topicsx", b"4"), Put("brokers/ids/1", b"5")])
    result = await store.range("topics/")
    assert [kv.key for kv in result.kvs] == ["topics/a", "topics/a/p/0", "topics/b"]
    assert result.revision == (await store.range("")).revision
    assert len((await store.range("")).kvs) == 5


async def test_delete_prefix_and_refused_branches(store_backend):
    store = store_backend.store
    await store.txn([], [Put("topics/t", b""), Put("topics/t/p/0", b""), Put("topics/t/p/1", b""),
                         Put("topics/u", b"")])
    result = await store.txn([], [Delete("topics/t", prefix=True), Get("topics/", prefix=True)])
    assert result.responses[0] == 3
    assert [kv.key for kv in result.responses[1]] == ["topics/u"]
    before = (await store.range("")).revision
    with pytest.raises(ValueError):
        await store.txn([], [Put("k", b"1"), Put("k", b"2")])
    with pytest.raises(ValueError):
        await store.txn([], [Put("topics/u", b"1"), Delete("topics/", prefix=True)])
    assert (await store.range("")).revision == before


async def test_put_under_an_unknown_lease_applies_nothing(store_backend):
    store = store_backend.store
    lease = await store.grant_lease(store_backend.ttl_s)
    await store.revoke_lease(lease.id)
    await store.revoke_lease(lease.id)  # already gone: not an error
    with pytest.raises(LeaseNotFound) as info:
        await store.txn([], [Put("other", b"1"), Put("brokers/ids/1", b"{}", lease.id)])
    assert info.value.lease_id == lease.id
    assert await store.get("other") is None


@SLOW_ON_ETCD
async def test_keep_alive_holds_a_lease_and_its_expiry_deletes_its_keys(store_backend):
    store, ttl = store_backend.store, store_backend.ttl_s
    lease = await store.grant_lease(ttl)
    assert lease.ttl_s >= ttl
    registered = await store.txn([absent("brokers/ids/1")], [Put("brokers/ids/1", b"{}", lease.id),
                                                             Put("brokers/ids/1/state", b"running", lease.id),
                                                             Put("unleased", b"stays")])
    assert (await store.get("brokers/ids/1")).lease == lease.id
    keeper = asyncio.create_task(store.keep_alive(lease.id))
    await store_backend.elapse(2 * ttl)
    assert (await store.get("brokers/ids/1")).create_revision == registered.revision

    keeper.cancel()  # the holder stops (dies): within a TTL the keys go, in one revision
    with contextlib.suppress(asyncio.CancelledError):
        await keeper
    async with contextlib.aclosing(store.watch("", registered.revision + 1)) as watch:
        await store_backend.elapse(ttl)
        batch = await next_batch(watch, timeout=ttl + 3)
    assert [(e.type, e.key, e.value) for e in batch] == [("delete", "brokers/ids/1", b""),
                                                         ("delete", "brokers/ids/1/state", b"")]
    assert len({e.mod_revision for e in batch}) == 1
    assert [e.prev.value for e in batch] == [b"{}", b"running"]
    assert batch[0].prev.create_revision == registered.revision  # the broker epoch that ended
    assert [kv.key for kv in (await store.range("")).kvs] == ["unleased"]
    with pytest.raises(LeaseLost):
        await asyncio.wait_for(store.keep_alive(lease.id), 5)


async def test_keep_alive_reports_a_revoked_lease(store_backend):
    store = store_backend.store
    lease = await store.grant_lease(store_backend.ttl_s)
    await put(store, "controller", b"1", lease.id)
    keeper = asyncio.create_task(store.keep_alive(lease.id))
    await asyncio.sleep(0.05)
    await store.revoke_lease(lease.id)
    assert await store.get("controller") is None
    with pytest.raises(LeaseLost) as info:
        await asyncio.wait_for(keeper, 5)
    assert info.value.lease_id == lease.id


async def test_watch_delivers_every_change_in_order_from_a_start_revision(store_backend):
    store = store_backend.store
    await put(store, "p/a", b"0")
    snapshot = await store.range("p/")
    start = snapshot.revision + 1
    r1 = await put(store, "p/a", b"1")
    r2 = (await store.txn([], [Put("p/b", b"2"), Put("p/c", b"3"), Put("q/x", b"outside")])).revision
    async with contextlib.aclosing(store.watch("p/", start)) as watch:
        # history first, then live changes, one list per revision
        assert summary(await next_batch(watch)) == [("put", "p/a", b"1", r1)]
        assert summary(await next_batch(watch)) == [("put", "p/b", b"2", r2), ("put", "p/c", b"3", r2)]
        assert not (await store.txn([modified_at("p/a", r1 - 1)], [Put("p/a", b"stale")])).succeeded
        r3 = (await store.txn([], [Delete("p/b")])).revision
        await put(store, "q/y", b"outside")
        r4 = await put(store, "p/a", b"4")
        deleted = await next_batch(watch)
        assert summary(deleted) == [("delete", "p/b", b"", r3)]
        assert (deleted[0].create_revision, deleted[0].version, deleted[0].prev.value) == (0, 0, b"2")
        changed = await next_batch(watch)
        assert summary(changed) == [("put", "p/a", b"4", r4)]
        assert (changed[0].version, changed[0].prev.value, changed[0].prev.mod_revision) == (3, b"1", r1)
        assert changed[0].create_revision == snapshot.kvs[0].create_revision


async def test_watch_resumes_from_the_revision_after_the_last_seen(store_backend):
    store = store_backend.store
    start = (await store.range("")).revision + 1
    revisions = [await put(store, f"k{i}", str(i).encode()) for i in range(3)]
    seen = []
    async with contextlib.aclosing(store.watch("", start)) as watch:
        for _ in range(2):
            seen.extend(summary(await next_batch(watch)))
    # disconnected; changes go on meanwhile
    revisions += [await put(store, f"k{i}", str(i).encode()) for i in range(3, 5)]
    async with contextlib.aclosing(store.watch("", seen[-1][3] + 1)) as watch:
        for _ in range(3):
            seen.extend(summary(await next_batch(watch)))
    assert seen == [("put", f"k{i}", str(i).encode(), r) for i, r in enumerate(revisions)]


async def test_compaction_makes_older_revisions_compacted(store_backend):
    store = store_backend.store
    first = await put(store, "k", b"1")
    await put(store, "k", b"2")
    last = await put(store, "k", b"3")
    await store.compact(last)
    with pytest.raises(Compacted) as info:
        async with contextlib.aclosing(store.watch("", first)) as watch:
            await next_batch(watch)
    assert info.value.compact_revision == last
    with pytest.raises(Compacted):
        await store.compact(last)
    with pytest.raises(ValueError):
        await store.compact(last + 100)
    # re-read a snapshot and watch from after it: the way back after Compacted
    snapshot = await store.range("")
    assert [kv.value for kv in snapshot.kvs] == [b"3"]
    async with contextlib.aclosing(store.watch("", snapshot.revision + 1)) as watch:
        r = await put(store, "k", b"4")
        assert summary(await next_batch(watch)) == [("put", "k", b"4", r)]
