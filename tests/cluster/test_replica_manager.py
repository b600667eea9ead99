"""ReplicaManager and the replica fetcher in process: three nodes with real logs, fetches through the
Fetch codecs, ISR writes by compare-and-set on a LocalStore (tests/cluster/replica_cluster.py)."""
from __future__ import annotations

import asyncio

import pytest

from kcoord.protocol.errors import ErrorCode
from tests.cluster.replica_cluster import ReplicaCluster


@pytest.fixture
async def cluster(tmp_path):
    c = ReplicaCluster(tmp_path)
    yield c
    await c.close()


async def test_acks_all_answers_once_every_isr_member_holds_the_write(cluster):
    await cluster.start()
    for i in range(5):
        assert await cluster.produce(1, count=2, value=b"%d" % i) == ErrorCode.NONE
        leader_end = cluster.log(1).log_end_offset
        # acknowledged: every ISR member has it (the high watermark passed it)
        assert cluster.part(1).high_watermark == leader_end
        assert all(cluster.log(b).log_end_offset >= leader_end for b in (2, 3))
    await cluster.until(lambda: all(cluster.part(b).high_watermark == 10 for b in (2, 3)), what="follower HWs")
    assert cluster.batches(1) == cluster.batches(2) == cluster.batches(3)
    assert (await cluster.registration()).isr == (1, 2, 3)


async def test_acks_all_waits_for_a_cut_follower_until_it_leaves_the_isr_and_it_rejoins(cluster):
    await cluster.start()
    assert await cluster.produce(1) == ErrorCode.NONE
    cluster.cut.add((3, 1))
    # 3 is still in the ISR: the write cannot be acknowledged
    assert await cluster.produce(1, timeout_ms=300) == ErrorCode.REQUEST_TIMED_OUT
    cluster.clock.sleep(11_000)  # past replica.lag.time.max.ms
    cluster.managers[1].shrink_isrs()
    await cluster.until(lambda: cluster.part(1).isr == frozenset({1, 2}), what="ISR shrink committed")
    assert (await cluster.registration()).isr == (1, 2)
    await cluster.refresh()
    assert await cluster.produce(1) == ErrorCode.NONE
    cluster.cut.clear()
    # it catches up, is in sync, and the leader writes it back into the ISR
    await cluster.until(lambda: cluster.part(1).isr == frozenset({1, 2, 3}), what="ISR expansion")
    assert (await cluster.registration()).isr == (1, 2, 3)
    await cluster.refresh()
    assert await cluster.produce(1) == ErrorCode.NONE
    assert cluster.log(3).log_end_offset == cluster.log(1).log_end_offset
    assert cluster.batches(1) == cluster.batches(3)


async def test_below_min_isr_acks_all_is_refused_and_acks_1_is_taken(tmp_path):
    cluster = ReplicaCluster(tmp_path, min_isr=2)
    try:
        await cluster.start()
        assert await cluster.produce(1) == ErrorCode.NONE
        cluster.cut.update({(2, 1), (3, 1)})
        # a follower at the leader's log end stays caught up (ReplicaState.isCaughtUp): the log must move
        assert await cluster.produce(1, acks=1) == ErrorCode.NONE
        cluster.clock.sleep(11_000)
        cluster.managers[1].shrink_isrs()
        await cluster.until(lambda: cluster.part(1).isr == frozenset({1}), what="ISR {1}")
        await cluster.refresh()
        end = cluster.log(1).log_end_offset
        assert await cluster.produce(1) == ErrorCode.NOT_ENOUGH_REPLICAS
        assert cluster.log(1).log_end_offset == end  # refused before the append
        assert await cluster.produce(1, acks=1) == ErrorCode.NONE
        # the high watermark is frozen below min ISR (KIP-966): consumers see neither acks=1 write
        assert cluster.managers[1].consumer_fetch_bounds("t", 0, -1, 10**9) == (ErrorCode.NONE, 1)
    finally:
        await cluster.close()


async def test_produce_and_consumer_fetch_on_a_follower(cluster):
    await cluster.start()
    assert cluster.managers[2].produce_error("t", 0, -1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert cluster.managers[2].produce_error("nope", 0, 1) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.managers[2].consumer_fetch_bounds("t", 0, -1, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert cluster.managers[1].consumer_fetch_bounds("t", 0, 1, 0)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH


async def test_an_old_leader_truncates_its_unreplicated_writes_by_diverging_epoch(cluster):
    await cluster.start()
    assert await cluster.produce(1, count=3) == ErrorCode.NONE
    cluster.cut.update({(2, 1), (3, 1)})
    # acks=1 writes only the old leader holds
    for _ in range(3):
        assert await cluster.produce(1, acks=1, value=b"lost") == ErrorCode.NONE
    assert cluster.log(1).log_end_offset == 6
    await cluster.elect(2, (2, 3))  # node 1 is declared dead; 2 leads at epoch 1
    assert cluster.part(2).is_leader and cluster.part(1).role.value == "follower"
    assert await cluster.produce(2, count=2, value=b"new") == ErrorCode.NONE
    cluster.cut.clear()
    await cluster.until(lambda: cluster.batches(1) == cluster.batches(2), what="node 1 converged on node 2")
    assert cluster.log(1).log_end_offset == 5
    assert b"lost" not in b"".join(cluster.batches(1))
    assert cluster.log(1).leader_epochs.entries == cluster.log(2).leader_epochs.entries
    await cluster.until(lambda: cluster.part(2).isr == frozenset({1, 2, 3}), what="node 1 back in the ISR")


async def test_a_deposed_leader_fails_its_waiting_acks_all_writes(cluster):
    await cluster.start()
    cluster.cut.update({(2, 1), (3, 1)})
    waiting = asyncio.ensure_future(cluster.produce(1, timeout_ms=10_000))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await cluster.elect(2, (2, 3))
    assert await waiting == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_offset_for_leader_epoch_from_the_replication_state(cluster):
    await cluster.start()
    assert await cluster.produce(1, count=4) == ErrorCode.NONE
    await cluster.elect(2, (1, 2, 3))
    rm1, rm2 = cluster.managers[1], cluster.managers[2]
    assert rm2.offset_for_leader_epoch("t", 0, 1, 0, -1) == (ErrorCode.NONE, 0, 4)
    assert rm2.offset_for_leader_epoch("t", 0, 0, 0, -1)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert rm1.offset_for_leader_epoch("t", 0, 1, 0, -1)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rm1.offset_for_leader_epoch("t", 0, 1, 0, 3) == (ErrorCode.NONE, 0, 4)  # a follower may answer a replica
    assert rm1.offset_for_leader_epoch("u", 0, -1, 0, -1)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
