"""Producer-id blocks (kcoord.metadata.producer_ids): no id handed out twice, by one node or by several.

Follows Kafka's RPCProducerIdManager.generateProducerId (core/src/main/scala/kafka/coordinator/transaction/
ProducerIdManager.scala: prefetch at 90% of the block, no id while no block: COORDINATOR_LOAD_IN_PROGRESS)
and ProducerIdControlManager.generateNextProducerId (metadata/src/main/java/org/apache/kafka/controller/
ProducerIdControlManager.java: one fact, the next block's start, advanced by one block per claim)."""
from __future__ import annotations

import asyncio

import pytest

from kcoord.coordinator.testing import ManualClock
from kcoord.metadata.local_store import LocalStore
from kcoord.metadata.producer_ids import (
    PRODUCER_IDS_KEY,
    FileProducerIds,
    ProducerIdBlock,
    ProducerIdBlocks,
    ProducerIdsUnavailable,
    StoreProducerIds,
    claim_block,
    decode_next_block,
)


def test_no_block_no_id_and_a_block_is_wanted():
    blocks = ProducerIdBlocks()
    assert blocks.generate() is None
    assert blocks.wants_block()


def test_the_next_block_is_wanted_at_90_percent_and_used_when_the_current_one_runs_out():
    blocks = ProducerIdBlocks()
    blocks.on_block(ProducerIdBlock(1, 0, 10))
    ids = [blocks.generate() for _ in range(8)]
    assert ids == list(range(8)) and not blocks.wants_block()
    assert blocks.generate() == 8
    assert blocks.wants_block()  # 9 of 10 used
    blocks.on_block(ProducerIdBlock(1, 30, 10))  # another node claimed 10-29 meanwhile
    assert not blocks.wants_block()
    assert [blocks.generate() for _ in range(3)] == [9, 30, 31]


def test_a_block_arriving_after_the_current_one_ran_out_becomes_current():
    blocks = ProducerIdBlocks()
    blocks.on_block(ProducerIdBlock(1, 0, 2))
    assert [blocks.generate(), blocks.generate(), blocks.generate()] == [0, 1, None]
    blocks.on_block(ProducerIdBlock(1, 2, 2))
    assert blocks.generate() == 2


async def test_concurrent_claims_get_disjoint_consecutive_blocks():
    store = LocalStore(timer=ManualClock().timers)
    claimed = await asyncio.gather(*(claim_block(store, node, 1000) for node in (1, 2, 3, 1, 2, 3)))
    assert sorted(b.first for b in claimed) == [0, 1000, 2000, 3000, 4000, 5000]
    kv = await store.get(PRODUCER_IDS_KEY)
    assert kv is not None and decode_next_block(kv.value) == 6000


async def test_nodes_sharing_a_store_never_hand_out_the_same_id():
    store = LocalStore(timer=ManualClock().timers)
    nodes = [StoreProducerIds(store, node_id, size=10) for node_id in (1, 2, 3)]
    with pytest.raises(ProducerIdsUnavailable):  # nothing claimed yet: load in progress
        nodes[0].generate()
    seen: list[int] = []
    for _ in range(200):
        for node in nodes:
            try:
                seen.append(node.generate())
            except ProducerIdsUnavailable:
                pass
        await asyncio.sleep(0)
    assert len(seen) > 400  # prefetching keeps them supplied
    assert len(seen) == len(set(seen))
    for node in nodes:
        await node.close()


def test_single_node_ids_survive_a_restart_without_reuse(tmp_path):
    first = FileProducerIds(str(tmp_path))
    used = {first.generate() for _ in range(5)}
    again = FileProducerIds(str(tmp_path))
    assert again.generate() not in used
    assert again.was_allocated(3) and not again.was_allocated(5000)


async def test_init_producer_id_is_load_in_progress_until_a_block_is_claimed(tmp_path):
    """RPCProducerIdManager.generateProducerId fails with CoordinatorLoadInProgressException while it has
    no block; InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry."""
    from kcoord.broker.data.producers import ProducerStateManager
    from kcoord.protocol.errors import ErrorCode

    store = LocalStore(timer=ManualClock().timers)
    producers = ProducerStateManager(str(tmp_path), logs=None)
    ids = StoreProducerIds(store, 1)
    producers.use_ids(ids)
    assert producers.init_producer(-1, -1) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    for _ in range(10):
        await asyncio.sleep(0)
    assert producers.init_producer(-1, -1) == (ErrorCode.NONE, 0, 0)
    assert producers.init_producer(0, 0) == (ErrorCode.NONE, 0, 1)  # KIP-360: any node may bump any id
    await ids.close()
