"""PrefixFollower.write_on_copy: a change computed from a node's copy is written only if nobody changed the key
since that copy, so two nodes changing one config resource at once cannot lose a change (Kafka's controller
applies such changes one at a time: metadata/.../controller/ConfigurationControlManager.incrementalAlterConfigs
reads the current value and writes the result in one step). Runs on a LocalStore and on a real etcd."""
from __future__ import annotations

import asyncio

from kcoord.metadata.prefix_follower import PrefixFollower, StaleCopy
from kcoord.metadata.store import Delete, Put

PREFIX = "config/things/"


async def _nodes(store, count: int) -> list[PrefixFollower]:
    followers = [PrefixFollower(store, PREFIX, lambda values: None) for _ in range(count)]
    for follower in followers:
        await follower.start()
    return followers


async def _close(followers) -> None:
    for follower in followers:
        await follower.close()


def _one_refused(outcomes) -> int:
    """The index of the write that lost (which one lands first is the store's: etcd may take b's first)."""
    assert sorted(type(o).__name__ for o in outcomes) == ["NoneType", "StaleCopy"], outcomes
    return 0 if isinstance(outcomes[0], StaleCopy) else 1


async def test_of_two_changes_made_from_the_same_copy_one_is_refused_and_its_node_then_sees_the_other(store_backend):
    nodes = await _nodes(store_backend.store, 2)
    try:
        # both computed from copies at one revision (the key absent): without the compare, the second put would
        # erase the first
        outcomes = await asyncio.gather(*(node.write_on_copy("r", Put(PREFIX + "r", b"from-%d" % i))
                                          for i, node in enumerate(nodes)), return_exceptions=True)
        lost = _one_refused(outcomes)
        loser, winner = nodes[lost], nodes[1 - lost]
        assert loser.values["r"] == b"from-%d" % (1 - lost)  # caught up: computing again starts from the winner's
        await loser.write_on_copy("r", Put(PREFIX + "r", b"both"))
        assert (await store_backend.store.get(PREFIX + "r")).value == b"both"
        await asyncio.wait_for(winner.wait_for(loser.revision), 5)
        assert winner.values["r"] == b"both"
    finally:
        await _close(nodes)


async def test_a_change_racing_a_delete_of_its_key_loses_or_wins_whole(store_backend):
    store = store_backend.store
    await store.txn([], [Put(PREFIX + "r", b"old")])
    deleter, changer = await _nodes(store, 2)
    try:
        outcomes = await asyncio.gather(deleter.write_on_copy("r", Delete(PREFIX + "r")),
                                        changer.write_on_copy("r", Put(PREFIX + "r", b"old+1")),
                                        return_exceptions=True)
        if _one_refused(outcomes) == 1:  # the delete came first: the change is refused, its copy drops the key
            assert "r" not in changer.values and await store.get(PREFIX + "r") is None
        else:  # the change came first: the delete (computed from "old") is refused, its copy has the change
            assert deleter.values["r"] == b"old+1" and (await store.get(PREFIX + "r")).value == b"old+1"
    finally:
        await _close([deleter, changer])


async def test_a_change_on_a_current_copy_is_written_and_seen_by_its_node_at_once(store_backend):
    (node,) = await _nodes(store_backend.store, 1)
    try:
        await store_backend.store.txn([], [Put("config/other/x", b"1")])  # writes under other prefixes do not matter
        await node.write_on_copy("new", Put(PREFIX + "new", b"1"))
        assert node.values["new"] == b"1"
        await node.write_on_copy("new", Delete(PREFIX + "new"))
        assert "new" not in node.values and await store_backend.store.get(PREFIX + "new") is None
    finally:
        await _close([node])
