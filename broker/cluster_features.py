"""Cluster mode's finalized feature levels (KIP-584): one value in the metadata store, followed by every node.

Kafka 4 keeps them as FeatureLevelRecords in the metadata log (the controller's FeatureControlManager
writes them, every broker's MetadataCache follows them; ZooKeeper-era Kafka had the `/feature` znode).
Here `features` holds {"epoch", "levels"}; UpdateFeatures through any node checks the request
against the stored levels (FeatureStore.plan, Kafka's rules) and writes the result on the condition that
the value is still the one checked against (its mod revision), so two concurrent updates cannot both land
on the same old levels (the loser checks again). A cluster that never changed a feature has no key:
every node then has the defaults, as each node of a new Kafka cluster bootstraps them.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping

from kcoord.metadata.features import DEFAULT_LEVELS, FeatureStore, FeatureUpdate, UpdateResult
from kcoord.metadata.prefix_follower import PrefixFollower
from kcoord.metadata.store import MetadataStore, Put, absent, modified_at
from kcoord.protocol.errors import ErrorCode

log = logging.getLogger("kcoord.cluster.features")

PREFIX = "features"
FINALIZED = ""  # the key itself, relative to PREFIX
MAX_ATTEMPTS = 10


def encode(levels: Mapping[str, int], epoch: int) -> bytes:
    return json.dumps({"epoch": epoch, "levels": dict(sorted(levels.items()))}, separators=(",", ":")).encode()


class ClusterFeatures:
    def __init__(self, store: MetadataStore, features: FeatureStore,
                 on_replaced: Callable[[], None] | None = None) -> None:
        """`on_replaced`: called after each change of the levels this node follows (what depends on a level,
        such as whether cordoned.log.dirs has effect, is recomputed there)."""
        self._store = store
        self._features = features
        self._on_replaced = on_replaced
        self._defaults = (dict(DEFAULT_LEVELS), 0)  # what a cluster without the key has (not this node's file)
        self.follower = PrefixFollower(store, PREFIX, self._on_change)

    async def start(self) -> None:
        await self.follower.start()

    async def close(self) -> None:
        await self.follower.close()

    def _on_change(self, values: Mapping[str, bytes]) -> None:
        value = values.get(FINALIZED)
        if value is None:
            self._replace(*self._defaults)
            return
        try:
            doc = json.loads(value)
            levels = {str(k): int(v) for k, v in doc["levels"].items()}
            epoch = int(doc["epoch"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("ignoring the bad value of %s: %s", PREFIX, exc)
            return
        self._replace(levels, epoch)

    def _replace(self, levels: Mapping[str, int], epoch: int) -> None:
        before = self._features.levels()
        self._features.replace(dict(levels), epoch)
        if self._on_replaced is not None and self._features.levels() != before:
            self._on_replaced()

    async def update(self, updates: list[FeatureUpdate], validate_only: bool) -> UpdateResult:
        """FeatureStore.update's answer, the change made in the metadata store (StoreError: not made)."""
        key = PREFIX + FINALIZED
        for _ in range(MAX_ATTEMPTS):
            kv = await self._store.get(key)  # checked against the stored levels, not a lagging copy
            self._on_change({} if kv is None else {FINALIZED: kv.value})
            planned = self._features.plan(updates)
            if isinstance(planned, UpdateResult) or validate_only:
                return planned if isinstance(planned, UpdateResult) else UpdateResult(ErrorCode.NONE)
            if planned == self._features.levels():
                return UpdateResult(ErrorCode.NONE)
            compare = absent(key) if kv is None else modified_at(key, kv.mod_revision)
            result = await self._store.txn([compare], [Put(key, encode(planned, self._features.epoch + 1))])
            if result.succeeded:
                await self.follower.see_own_write(result.revision)  # answered once this node's copy has it
                return UpdateResult(ErrorCode.NONE)
        return UpdateResult(ErrorCode.REQUEST_TIMED_OUT, "The finalized features kept changing under this update.")
