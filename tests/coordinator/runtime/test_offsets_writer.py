"""OffsetsTopicWriter over real storage: a partition's writes of one loop tick share one append and one
fsync wait; every write is answered, and a failed write or fsync fails every write it carried."""
from __future__ import annotations

import asyncio

import pytest

from kcoord.coordinator import GroupConfig, OffsetCommit, OffsetCommitRequestPartition
from kcoord.coordinator.runtime import OFFSETS_TOPIC, GroupRuntime
from kcoord.protocol.errors import ErrorCode as E
from kcoord.storage import FaultyFS, LogConfig, LogManager

CONFIG = GroupConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0)


async def started(manager: LogManager) -> GroupRuntime:
    runtime = GroupRuntime(lambda p: manager.get_or_create(OFFSETS_TOPIC, p), CONFIG)
    await runtime.start()
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    return runtime


def commit(runtime: GroupRuntime, group: str, partition: int, offset: int):
    return runtime.commit_offsets(OffsetCommit(group, "", None, -1,
                                               [OffsetCommitRequestPartition("t", partition, offset)]))


def committed(runtime: GroupRuntime, group: str, partition: int) -> int:
    return runtime.fetch_offsets(group, [("t", partition)], False).partitions[0].offset


async def test_writes_of_one_tick_share_one_append_and_each_is_answered(tmp_path):
    fs = FaultyFS()
    manager = LogManager(str(tmp_path), fs=fs)
    runtime = await started(manager)
    partition_log = manager.get_or_create(OFFSETS_TOPIC, 0)
    writes, end = fs.writes, partition_log.log_end_offset
    answers = await asyncio.gather(commit(runtime, "a", 0, 10), commit(runtime, "b", 0, 20), commit(runtime, "a", 1, 30))
    assert answers == [{("t", 0): E.NONE}, {("t", 0): E.NONE}, {("t", 1): E.NONE}]
    assert fs.writes - writes == 1  # one append of three batches
    assert len(list(partition_log.batches(end))) == 3  # still one batch per write
    assert partition_log.recovery_point == end + 3
    assert (committed(runtime, "a", 0), committed(runtime, "b", 0), committed(runtime, "a", 1)) == (10, 20, 30)
    await runtime.close()
    await manager.close()


async def test_a_log_that_leaves_flushing_to_the_os_answers_commits_without_an_fsync(tmp_path):
    # log.flush.interval.messages > 1 (flush_on_append False) is every log's setting, __consumer_offsets' too:
    # Kafka's GroupCoordinator appends with acks=-1 and no flush; the transaction coordinator here does the same
    fs = FaultyFS()
    manager = LogManager(str(tmp_path), fs=fs, default_config=LogConfig(flush_on_append=False))
    runtime = await started(manager)
    fsyncs = fs.fsyncs
    assert await asyncio.gather(commit(runtime, "a", 0, 10), commit(runtime, "b", 0, 20)) == [
        {("t", 0): E.NONE}, {("t", 0): E.NONE}]
    assert fs.fsyncs == fsyncs
    assert (committed(runtime, "a", 0), committed(runtime, "b", 0)) == (10, 20)
    await runtime.close()
    await manager.close()


@pytest.mark.parametrize("fault", ["fail_next_write", "fail_next_fsync"])
async def test_a_failed_shared_write_or_fsync_fails_every_commit_it_carried(tmp_path, fault):
    fs = FaultyFS()
    manager = LogManager(str(tmp_path), fs=fs)
    runtime = await started(manager)
    assert await commit(runtime, "a", 0, 1) == {("t", 0): E.NONE}
    getattr(fs, fault)()
    answers = await asyncio.gather(commit(runtime, "a", 0, 2), commit(runtime, "b", 0, 3))
    assert answers == [{("t", 0): E.NOT_COORDINATOR}, {("t", 0): E.NOT_COORDINATOR}]
    assert (committed(runtime, "a", 0), committed(runtime, "b", 0)) == (1, -1)
    partition_log = manager.get_or_create(OFFSETS_TOPIC, 0)
    assert partition_log.log_end_offset == partition_log.recovery_point == 1  # cut back: nothing acknowledged
    assert await commit(runtime, "b", 0, 4) == {("t", 0): E.NONE}
    assert committed(runtime, "b", 0) == 4
    await runtime.close()
    await manager.close()


async def test_writes_queued_together_beyond_segment_bytes_are_appended_apart(tmp_path):
    # One commit's batch fits a segment; two together would not, and must not fail for being queued together.
    manager = LogManager(str(tmp_path), default_config=LogConfig(segment_bytes=200))
    runtime = await started(manager)
    answers = await asyncio.gather(commit(runtime, "a", 0, 1), commit(runtime, "b", 0, 2))
    assert answers == [{("t", 0): E.NONE}, {("t", 0): E.NONE}]
    assert (committed(runtime, "a", 0), committed(runtime, "b", 0)) == (1, 2)
    await runtime.close()
    await manager.close()


async def test_close_writes_and_answers_the_commits_still_queued(tmp_path):
    manager = LogManager(str(tmp_path))
    runtime = await started(manager)
    reply = commit(runtime, "a", 0, 7)  # queued: the append happens after this tick
    assert not reply.done()
    await runtime.close()
    assert reply.result() == {("t", 0): E.NONE}
    assert manager.get_or_create(OFFSETS_TOPIC, 0).recovery_point == 1
    await manager.close()


class Replicas:
    """The ReplicaManager as the writer sees it (cluster mode): leadership and min ISR before the append,
    then the high watermark, released by the test."""

    def __init__(self) -> None:
        self.refuse = E.NONE
        self.appends = 0
        self.waits: list[tuple[int, asyncio.Future]] = []

    def produce_error(self, topic: str, partition: int, acks: int) -> E:
        assert (topic, acks) == (OFFSETS_TOPIC, -1)
        return self.refuse

    def on_leader_append(self, topic: str, partition: int) -> None:
        self.appends += 1

    async def wait_acks_all(self, topic: str, partition: int, last_offset: int, timeout_ms: int) -> E:
        future = asyncio.get_running_loop().create_future()
        self.waits.append((last_offset, future))
        return await future


async def test_cluster_mode_acknowledges_a_write_only_once_replicated(tmp_path):
    """Kafka's CoordinatorRuntime completes a write's deferred event when the high watermark passes it; a
    write that loses its leadership on the way answers NOT_COORDINATOR (CoordinatorOperationExceptionHelper)
    and replays nothing; a node that does not lead appends nothing."""
    manager = LogManager(str(tmp_path))
    replicas = Replicas()
    runtime = GroupRuntime(lambda p: manager.get_or_create(OFFSETS_TOPIC, p), CONFIG, replicas=lambda: replicas)
    await runtime.start()
    assert committed_error(runtime, "a") == E.NOT_COORDINATOR  # nothing led yet
    runtime.on_election(0, 1)
    await until(lambda: 0 in runtime.service.shards)
    answer = commit(runtime, "a", 0, 10)
    await until(lambda: replicas.waits)
    assert replicas.appends == 1 and not answer.done() and committed(runtime, "a", 0) == -1
    last_offset, future = replicas.waits.pop()
    assert last_offset == manager.get_or_create(OFFSETS_TOPIC, 0).log_end_offset - 1
    future.set_result(E.NONE)
    assert await answer == {("t", 0): E.NONE} and committed(runtime, "a", 0) == 10

    answer = commit(runtime, "a", 0, 11)
    await until(lambda: replicas.waits)
    replicas.waits.pop()[1].set_result(E.NOT_LEADER_OR_FOLLOWER)
    assert await answer == {("t", 0): E.NOT_COORDINATOR} and committed(runtime, "a", 0) == 10

    replicas.refuse = E.NOT_ENOUGH_REPLICAS
    end = manager.get_or_create(OFFSETS_TOPIC, 0).log_end_offset
    assert await commit(runtime, "a", 0, 12) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert manager.get_or_create(OFFSETS_TOPIC, 0).log_end_offset == end and committed(runtime, "a", 0) == 10

    runtime.on_resignation(0, 2)
    assert committed_error(runtime, "a") == E.NOT_COORDINATOR
    await runtime.close()
    await manager.close()


def committed_error(runtime: GroupRuntime, group: str) -> E:
    return runtime.fetch_offsets(group, None, False).error


async def until(condition) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in 5 s")
