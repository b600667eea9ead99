"""A node's registration: `brokers/ids/<id>` under the node's own lease; its create_revision is the broker
epoch (KIP-380: ZooKeeper-era Kafka took the czxid of the ephemeral `/brokers/ids/<id>` znode,
KafkaZkClient.registerBroker).

- Create-if-absent. A registration of the same id that is still there belongs to a previous incarnation
  whose lease has not expired yet (the process was killed and restarted within the TTL): wait for its
  delete through a watch, then create, as Kafka's restarted broker waits for the old session's
  ephemeral znode to go (KafkaZkClient.CheckedEphemeral, KafkaController.processRegisterBrokerAndReelect).
- keep_alive runs as a task of its own for as long as the registration lives.
- The lease lost (expired while the node was paused or cut off, or revoked): the registration is over,
  `lost` is set and `on_lost(epoch)` is called once, so the node drops every role at once and calls
  `register()` again, which gets a new lease and a new, higher epoch (KafkaController.processExpire /
  KafkaServer's session-expiry re-registration).
- `shutting_down()` marks the registration for controlled shutdown (Kafka's ControlledShutdown request;
  the controller moves leaderships away); `close()` revokes the lease, deleting the key at once.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable

from kcoord.cluster.keys import BrokerInfo, BrokerState, broker_key
from kcoord.metadata.store import Get, LeaseLost, MetadataStore, Put, StoreError, absent, created_at

log = logging.getLogger("kcoord.cluster.registration")

DEFAULT_TTL_S = 9  # KRaft's broker.session.timeout.ms (9 s); keep_alive refreshes about every TTL/3


class BrokerRegistration:
    def __init__(self, store: MetadataStore, info: BrokerInfo, *, ttl_s: int = DEFAULT_TTL_S,
                 on_lost: Callable[[int], None] | None = None) -> None:
        self._store = store
        self._info = info
        self._ttl_s = ttl_s
        self._on_lost = on_lost
        self._key = broker_key(info.broker_id)
        self._lease_id: int | None = None
        self._epoch: int | None = None
        self._keeper: asyncio.Task[None] | None = None
        self.lost = asyncio.Event()  # set when the lease is gone; cleared by the next register()

    @property
    def broker_id(self) -> int:
        return self._info.broker_id

    @property
    def epoch(self) -> int | None:
        """The broker epoch while registered (the key's create_revision), else None."""
        return None if self.lost.is_set() else self._epoch

    @property
    def lease_id(self) -> int | None:
        """The node's lease: the controller key is put under it too, so one expiry ends both roles."""
        return None if self.lost.is_set() else self._lease_id

    async def register(self) -> int:
        """Register (again) under a new lease and return the broker epoch. Raises LeaseLost if the new
        lease is lost while waiting for a previous incarnation's key to go."""
        if self._keeper is not None and not self._keeper.done():
            raise RuntimeError(f"broker {self.broker_id} is already registered")
        self.lost.clear()
        self._epoch = None
        lease = await self._store.grant_lease(self._ttl_s)
        self._lease_id = lease.id
        self._keeper = asyncio.create_task(self._keep(lease.id), name=f"keep-alive broker {self.broker_id}")
        while True:
            result = await self._store.txn(
                [absent(self._key)], [Put(self._key, self._info.encode(), lease.id)], [Get(self._key)])
            if result.succeeded:
                self._epoch = result.revision
                log.info("broker %d registered with epoch %d", self.broker_id, self._epoch)
                return self._epoch
            held = result.responses[0]
            old = held[0].create_revision if isinstance(held, tuple) and held else None
            log.info("broker %d: a previous registration (epoch %s) is still there; waiting for it to go",
                     self.broker_id, old)
            waiting = asyncio.ensure_future(self._deleted(result.revision + 1))
            await asyncio.wait([waiting, self._keeper], return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiting
                raise LeaseLost(lease.id)
            waiting.result()

    async def _deleted(self, from_revision: int) -> None:
        """Until this id's key is deleted (watching from `from_revision`: nothing is missed)."""
        async with contextlib.aclosing(self._store.watch(self._key, from_revision)) as watch:
            async for batch in watch:
                if any(e.key == self._key and e.type == "delete" for e in batch):
                    return

    async def _keep(self, lease_id: int) -> None:
        try:
            await self._store.keep_alive(lease_id)
        except LeaseLost:
            epoch = self._epoch
            self.lost.set()
            log.warning("broker %d lost its lease (epoch %s): every role ends", self.broker_id, epoch)
            if epoch is not None and self._on_lost is not None:
                self._on_lost(epoch)

    @property
    def info(self) -> BrokerInfo:
        return self._info

    async def shutting_down(self) -> bool:
        """Mark this registration `shutting_down` (controlled shutdown). False if it is no longer ours."""
        return await self.update(state=BrokerState.SHUTTING_DOWN)

    async def update(self, **changes) -> bool:
        """Change the registration's value in place (same epoch and lease; the next register() uses it too),
        as a KRaft broker's heartbeat updates its registration. False if it is not ours now."""
        self._info = dataclasses.replace(self._info, **changes)
        if self._epoch is None or self._lease_id is None or self.lost.is_set():
            return False
        result = await self._store.txn([created_at(self._key, self._epoch)],
                                       [Put(self._key, self._info.encode(), self._lease_id)])
        return result.succeeded

    async def stop_keep_alive(self) -> None:
        """Stop renewing the lease without revoking it: the registration then expires a TTL later, as a
        node paused or cut off from the store would (tests use it as their pause)."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper

    async def close(self) -> None:
        """Stop keeping the lease alive and revoke it: the registration (and a controllership held under
        the same lease) is deleted now, not a TTL later."""
        await self.stop_keep_alive()
        if self._lease_id is not None:
            with contextlib.suppress(StoreError):
                await self._store.revoke_lease(self._lease_id)
        self._epoch = None
