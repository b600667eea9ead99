"""Cluster mode's finalized features, followed from the metadata store: what depends on a level is recomputed
when a change lands. The case that needs it: cordoned.log.dirs has effect only from metadata.version 4.3-IV0
(KIP-1066), so a node whose directory is listed becomes cordoned in its registration when the cluster's
metadata.version is raised to that level, not at its next restart (Kafka: BrokerLifecycleManager sends the
cordoned directories with every heartbeat, and the broker's MetadataCache sees the new level at once)."""
from __future__ import annotations

from kcoord.broker.cluster_features import ClusterFeatures, encode
from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.features import DEFAULT_LEVELS, IBP_4_3_IV0, METADATA_VERSION, FeatureStore
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.store import Put


async def test_a_change_of_the_levels_calls_back_once_and_an_unchanged_value_does_not(tmp_path):
    store = LocalStore(timer=ManualClock().timers)
    features = FeatureStore(str(tmp_path), 1)
    seen: list[tuple[int, bool]] = []
    follower = ClusterFeatures(store, features, lambda: seen.append(
        (features.level(METADATA_VERSION), features.cordoning_supported())))
    await follower.start()
    try:
        older = dict(DEFAULT_LEVELS, **{METADATA_VERSION: IBP_4_3_IV0 - 1})
        result = await store.txn([], [Put("features", encode(older, 1))])
        await follower.follower.see_own_write(result.revision)
        assert seen == [(IBP_4_3_IV0 - 1, False)]
        result = await store.txn([], [Put("features", encode(older, 1))])  # the same levels again
        await follower.follower.see_own_write(result.revision)
        assert seen == [(IBP_4_3_IV0 - 1, False)], "nothing changed: no call"
        newer = dict(older, **{METADATA_VERSION: IBP_4_3_IV0})
        result = await store.txn([], [Put("features", encode(newer, 2))])
        await follower.follower.see_own_write(result.revision)
        assert seen[-1] == (IBP_4_3_IV0, True), "cordoning takes effect with the level"
    finally:
        await follower.close()
