"""Cluster mode's dynamic broker configs (KIP-226): in the metadata store, followed by every node.

Kafka 4 keeps them as ConfigRecords of BROKER resources in the metadata log (the cluster default under
the empty name, a node's own under its id), which every broker's DynamicBrokerConfig follows
(DynamicConfigPublisher); ZooKeeper-era Kafka had `/config/brokers/<default>` and `/config/brokers/<id>`.
Here:

| key                                | value                                      |
|------------------------------------|--------------------------------------------|
| `config/brokers/<default>`        | the cluster default's overrides, JSON      |
| `config/brokers/<id>`             | node <id>'s own overrides, JSON            |

A change is the resource's whole new set, put (or deleted when empty) as ZooKeeper-era
AdminZkClient.changeBrokerConfig wrote it; every node applies the layers that concern it
(DynamicBrokerConfigs.replace_layers) and its topics without an override take the new log configs.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kcoord.metadata.dynamic_broker_configs import CLUSTER_DEFAULT
from kcoord.metadata.prefix_follower import PrefixFollower
from kcoord.metadata.store import Delete, MetadataStore, Op, Put

if TYPE_CHECKING:
    from kcoord.broker.app import Broker

log = logging.getLogger("kcoord.cluster.configs")

PREFIX = "config/brokers/"
DEFAULT_NAME = "<default>"  # ZooKeeper-era Kafka's ConfigEntityName.DEFAULT
SEE_OWN_WRITE_TIMEOUT_S = 5.0


def key_of(resource_name: str) -> str:
    return PREFIX + (DEFAULT_NAME if resource_name == CLUSTER_DEFAULT else resource_name)


class ClusterBrokerConfigs:
    def __init__(self, store: MetadataStore, broker: Broker) -> None:
        self._store = store
        self._broker = broker
        self.follower = PrefixFollower(store, PREFIX, self._on_change)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.follower.run(), name="broker-configs-follower")
        await self.follower.wait_for(1)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def _on_change(self, values: Mapping[str, bytes]) -> None:
        layers: dict[str, dict[str, str]] = {}
        for name, value in values.items():
            try:
                layers[CLUSTER_DEFAULT if name == DEFAULT_NAME else name] = {
                    str(k): str(v) for k, v in json.loads(value).items()}
            except (ValueError, TypeError, AttributeError) as exc:
                log.error("ignoring the bad value of %s%s: %s", PREFIX, name, exc)
        if self._broker.dynamic_configs.replace_layers(layers):  # topics without an override follow
            self._broker.topics.refresh_log_configs()

    async def alter(self, resource_name: str, overrides: Mapping[str, str]) -> None:
        """Make `overrides` (validated by the caller) the resource's whole set, in the store; answered once
        this node applies it. StoreError: not made."""
        key = key_of(resource_name)
        op: Op = Put(key, json.dumps(dict(sorted(overrides.items()))).encode()) if overrides else Delete(key)
        result = await self._store.txn([], [op])
        try:
            await asyncio.wait_for(self.follower.wait_for(result.revision), SEE_OWN_WRITE_TIMEOUT_S)
        except TimeoutError:
            log.warning("broker configs of %r at revision %d not seen here within %.0f s", resource_name,
                        result.revision, SEE_OWN_WRITE_TIMEOUT_S)
