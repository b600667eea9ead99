"""Nodes of a cluster in one process for the membership / controller / metadata tests: each node has its
own store client (one LocalStore shared on a manual clock, or one EtcdStore client per node on a real
etcd namespace), a registration, a controller candidacy and a metadata follower.

`Env.settle(predicate)` waits until the predicate holds: on LocalStore by letting queued tasks run (no
time passes, so it is deterministic), on etcd by polling. `Env.elapse(s)` lets time pass as the store
sees it (the manual clock, or real time)."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import uuid
from collections.abc import Awaitable, Callable

from kcoord.cluster.controller import Controller
from kcoord.cluster.keys import BrokerInfo, Endpoint
from kcoord.cluster.metadata_image import MetadataFollower, MetadataImage, RoleChange
from kcoord.cluster.registration import BrokerRegistration
from kcoord.metadata.store import MetadataStore


@dataclasses.dataclass
class Env:
    name: str
    new_store: Callable[[], Awaitable[MetadataStore]]
    elapse: Callable[[float], Awaitable[None]]
    ttl_s: int = 2
    stores: list[MetadataStore] = dataclasses.field(default_factory=list)
    nodes: list[Node] = dataclasses.field(default_factory=list)
    local: MetadataStore | None = None  # the shared LocalStore (None on etcd)

    async def store(self) -> MetadataStore:
        store = await self.new_store()
        self.stores.append(store)
        return store

    async def settle(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
        if self.name == "local":
            for _ in range(2000):
                if predicate():
                    return
                await asyncio.sleep(0)
            raise AssertionError("the cluster did not settle (LocalStore: no task left to run)")
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not predicate():
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"the cluster did not settle within {timeout_s} s")
            await asyncio.sleep(0.01)

    async def expire_leases(self) -> None:
        """Long enough for a lease nobody keeps alive to expire (etcd: TTL plus its checking slack)."""
        await self.elapse(self.ttl_s + (0.1 if self.name == "local" else 1.0))


class Node:
    def __init__(self, env: Env, node_id: int, rack: str | None = None) -> None:
        self.env = env
        self.node_id = node_id
        self.rack = rack
        self.changes: list[RoleChange] = []
        self.lost: list[int] = []
        self.tasks: list[asyncio.Task] = []
        self.store: MetadataStore | None = None
        self.registration: BrokerRegistration | None = None
        self.controller: Controller | None = None
        self.follower: MetadataFollower | None = None

    async def start(self, store: MetadataStore | None = None, *, candidate: bool = True) -> Node:
        self.store = store or await self.env.store()
        info = BrokerInfo(self.node_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9091 + self.node_id),),
                          self.rack, uuid.uuid4().hex)
        self.registration = BrokerRegistration(self.store, info, ttl_s=self.env.ttl_s, on_lost=self.lost.append)
        await self.registration.register()
        self.follower = MetadataFollower(self.store, self.node_id, self._on_metadata)
        self.tasks = [asyncio.create_task(self.follower.run())]
        if candidate:
            self.controller = Controller(self.store, self.node_id, self.registration.lease_id,
                                         rng=random.Random(self.node_id))
            self.tasks.append(asyncio.create_task(self.controller.run()))
        return self

    def _on_metadata(self, old: MetadataImage, new: MetadataImage, changes: list[RoleChange]) -> None:
        self.changes.extend(changes)

    @property
    def image(self) -> MetadataImage:
        assert self.follower is not None
        return self.follower.image

    @property
    def epoch(self) -> int | None:
        return self.registration.epoch if self.registration else None

    async def _cancel_tasks(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.tasks = []

    async def pause(self) -> None:
        """SIGSTOP in one process: nothing of the node runs any more and its lease is not renewed (it
        expires a TTL later); its objects keep what they knew."""
        await self._cancel_tasks()
        assert self.registration is not None
        await self.registration.stop_keep_alive()

    async def stop(self) -> None:
        await self._cancel_tasks()
        if self.registration is not None:
            await self.registration.close()


def active_controllers(nodes: list[Node]) -> list[Node]:
    return [n for n in nodes if n.controller is not None and n.controller.epoch is not None]
