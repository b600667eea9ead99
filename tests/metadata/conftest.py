"""The metadata store under test: `store_backend` is a LocalStore on a manual clock, or an EtcdStore in a
namespace of its own on a real etcd (one member per session, kcoord.testkit.etcd); the contract tests
take it, so the same test functions run on both.

The `etcd_server` fixture lives here until the test kit's fixtures settle (testkit/pytest_plugin.py,
tests/support/ are being reworked); kcoord.testkit.etcd.EtcdProcess is the part to adopt.
"""
from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable

import pytest

from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.store import MetadataStore
from kcoord.testkit.etcd import INSTALL_HINT, EtcdProcess, etcd_binary


def need_etcd() -> None:
    if etcd_binary() is None:
        pytest.skip(INSTALL_HINT)


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory):
    need_etcd()
    etcd = EtcdProcess(tmp_path_factory.mktemp("etcd")).start()
    yield etcd
    etcd.stop()


async def open_etcd_store(connect: str, timeout_s: float = 3.0):
    from kcoord.cluster.etcd_connect import parse_etcd_connect
    from kcoord.cluster.etcd_store import EtcdStore

    return await EtcdStore.open(parse_etcd_connect(connect), timeout_s=timeout_s)


@dataclasses.dataclass
class Backend:
    name: str
    store: MetadataStore
    elapse: Callable[[float], Awaitable[None]]  # let this much time pass, as the store sees time
    ttl_s: int = 2  # etcd's floor with default timings


@pytest.fixture(params=["local", "etcd"])
async def store_backend(request):
    if request.param == "local":
        clock = ManualClock()
        store = LocalStore(timer=clock.timers)

        async def elapse(seconds: float) -> None:
            await asyncio.sleep(0)  # tasks already started (a keep_alive) run before time moves
            clock.sleep(int(seconds * 1000))
            await asyncio.sleep(0)  # and see what the timers did

        yield Backend("local", store, elapse)
    else:
        need_etcd()
        server = request.getfixturevalue("etcd_server")
        store = await open_etcd_store(f"{server.connect}/test/{uuid.uuid4().hex[:12]}")
        yield Backend("etcd", store, asyncio.sleep)
    await store.close()
