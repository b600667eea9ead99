"""What only a real etcd can show: the EtcdStore's streams outlive a restarted etcd, the client moves to
the next endpoint, namespaces (kcoord.etcd.connect's prefix) keep clusters apart."""
import asyncio
import contextlib

import pytest

from kcoord.metadata.store import Put, StoreUnavailable
from kcoord.testkit.etcd import EtcdProcess, free_port
from tests.metadata.conftest import need_etcd, open_etcd_store


@pytest.fixture
def own_etcd(tmp_path):
    """A member of its own: these tests kill it."""
    need_etcd()
    etcd = EtcdProcess(tmp_path).start()
    yield etcd
    etcd.stop()


@pytest.mark.slow
async def test_watch_and_keep_alive_outlive_an_etcd_restart(own_etcd):
    store = await open_etcd_store(own_etcd.connect, timeout_s=1.0)
    try:
        lease = await store.grant_lease(2)
        await store.txn([], [Put("brokers/ids/1", b"{}", lease.id)])
        keeper = asyncio.create_task(store.keep_alive(lease.id))
        start = (await store.range("")).revision + 1
        async with contextlib.aclosing(store.watch("", start)) as watch:
            r1 = (await store.txn([], [Put("a", b"1")])).revision
            assert [e.mod_revision for e in await asyncio.wait_for(anext(watch), 5)] == [r1]
            own_etcd.kill()
            with pytest.raises(StoreUnavailable):
                await store.get("a")
            await asyncio.sleep(1)
            own_etcd.start()
            r2 = (await store.txn([], [Put("a", b"2")])).revision
            r3 = (await store.txn([], [Put("b", b"3")])).revision
            got = [(await asyncio.wait_for(anext(watch), 10))[0] for _ in range(2)]
            assert [(e.key, e.value, e.mod_revision) for e in got] == [("a", b"2", r2), ("b", b"3", r3)]
        await asyncio.sleep(2.5)  # past the TTL: the keepalive stream was reopened
        assert not keeper.done()
        assert (await store.get("brokers/ids/1")).lease == lease.id
        keeper.cancel()
    finally:
        await store.close()


async def test_the_client_moves_to_an_endpoint_that_answers(etcd_server):
    dead = free_port()
    for connect in (f"127.0.0.1:{dead},{etcd_server.connect}/x",      # several addresses: pick_first
                    f"localhost:{etcd_server.client_port},127.0.0.1:{dead}/x"):  # names resolved first
        store = await open_etcd_store(connect)
        try:
            revision = (await store.txn([], [Put("k", b"v")])).revision
            assert (await store.get("k")).mod_revision == revision
        finally:
            await store.close()


async def test_prefixes_keep_clusters_apart(etcd_server):
    one = await open_etcd_store(f"{etcd_server.connect}/kc/one")
    two = await open_etcd_store(f"{etcd_server.connect}/kc/one-two")
    try:
        await one.txn([], [Put("controller", b"1")])
        assert await two.get("controller") is None
        assert (await two.range("")).kvs == ()
        assert [kv.key for kv in (await one.range("")).kvs] == ["controller"]
    finally:
        await one.close()
        await two.close()
