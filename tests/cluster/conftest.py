"""`cluster_env`: the nodes' stores, on LocalStore (a manual clock, deterministic) or on a real etcd (one
EtcdStore client per node in a namespace of its own; the session's etcd member comes from
tests/metadata/conftest.py). Tests that expire leases on etcd wait real seconds: mark them slow.
`admin`: a kafka-python admin client of the test's `kafka_cluster`."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.local_store import LocalStore
from tests.cluster.nodes import Env, Node
from tests.metadata.conftest import etcd_server, need_etcd, open_etcd_store  # noqa: F401  (fixture)

ON_BOTH = pytest.mark.parametrize("cluster_env", ["local", "etcd"], indirect=True)
SLOW_ON_ETCD = pytest.mark.parametrize(
    "cluster_env", ["local", pytest.param("etcd", marks=pytest.mark.slow)], indirect=True)


@pytest.fixture
def admin(kafka_cluster):
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers, request_timeout_ms=10_000)
    yield client
    client.close()


@pytest.fixture(params=["local"])
async def cluster_env(request):
    if request.param == "local":
        clock = ManualClock()
        shared = LocalStore(timer=clock.timers)

        async def new_store():
            return shared

        async def elapse(seconds: float) -> None:
            await asyncio.sleep(0)
            clock.sleep(int(seconds * 1000))
            await asyncio.sleep(0)

        env = Env("local", new_store, elapse, local=shared)
        yield env
    else:
        need_etcd()
        server = request.getfixturevalue("etcd_server")
        connect = f"{server.connect}/test/{uuid.uuid4().hex[:12]}"

        async def new_store():
            return await open_etcd_store(connect)

        env = Env("etcd", new_store, asyncio.sleep)
        yield env
    for node in env.nodes:
        await node.stop()
    for store in {id(s): s for s in env.stores}.values():
        await store.close()


async def start_nodes(env: Env, count: int, *, racks: list[str | None] | None = None,
                      candidate: bool = True) -> list[Node]:
    started = []
    for i in range(count):
        node = await Node(env, i + 1, (racks or [None] * count)[i]).start(candidate=candidate)
        env.nodes.append(node)
        started.append(node)
    return started
