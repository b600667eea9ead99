"""The coordinator runtime in-process over real storage (tmp dir): durable writes, loading by replay
with COORDINATOR_LOAD_IN_PROGRESS meanwhile, write failures, and keyed loop timers."""
from __future__ import annotations

import asyncio
import time

from kcoord.coordinator import GroupConfig, OffsetCommit, OffsetCommitRequestPartition, RequestContext
from kcoord.coordinator.runtime import OFFSETS_TOPIC, GroupRuntime, LoopTimer, WallClock
from kcoord.protocol import messages as m
from kcoord.protocol.consumer_offsets import partition_for
from kcoord.protocol.errors import ErrorCode as E
from kcoord.storage import FS, FaultyFS, LogManager

CONFIG = GroupConfig(offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=0)


def runtime_over(manager: LogManager) -> GroupRuntime:
    return GroupRuntime(lambda p: manager.get_or_create(OFFSETS_TOPIC, p), CONFIG)


async def commit(runtime: GroupRuntime, group: str, offset: int) -> E:
    errors = await runtime.commit_offsets(OffsetCommit(group, "", None, -1,
                                                       [OffsetCommitRequestPartition("t", 0, offset)]))
    return errors[("t", 0)]


def fetched(runtime: GroupRuntime, group: str) -> int:
    result = runtime.fetch_offsets(group, [("t", 0)], False)
    return result.partitions[0].offset


async def test_commits_are_replayed_on_the_next_start(tmp_path):
    manager = LogManager(str(tmp_path))
    runtime = runtime_over(manager)
    await runtime.start()
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    assert await commit(runtime, "g", 41) == E.NONE
    assert await commit(runtime, "g", 42) == E.NONE
    end = manager.get_or_create(OFFSETS_TOPIC, runtime.partition_for("g")).log_end_offset
    await runtime.close()
    await manager.close()
    assert end == 2  # one record per commit, appended to the group's partition

    manager = LogManager(str(tmp_path))
    runtime = runtime_over(manager)
    await runtime.start()
    # Loading runs in the background: until it has replayed the partition, the group is not served.
    assert runtime.fetch_offsets("g", None, False).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert runtime.list_groups(None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    assert runtime.list_groups(None)[0] == E.NONE
    assert fetched(runtime, "g") == 42
    await runtime.close()
    await manager.close()


async def test_a_failed_fsync_fails_the_commit_and_the_next_one_succeeds(tmp_path):
    fs = FaultyFS()
    manager = LogManager(str(tmp_path), fs=fs)
    runtime = runtime_over(manager)
    await runtime.start()
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    assert await commit(runtime, "g", 1) == E.NONE
    fs.fail_next_fsync()
    assert await commit(runtime, "g", 2) == E.NOT_COORDINATOR  # Kafka's mapping of a storage error
    assert fetched(runtime, "g") == 1
    assert await commit(runtime, "g", 3) == E.NONE
    assert fetched(runtime, "g") == 3
    await runtime.close()
    await manager.close()


async def test_fail_offsets_writes_fails_exactly_that_many_writes(tmp_path):
    manager = LogManager(str(tmp_path / "data"))
    runtime = runtime_over(manager)
    await runtime.start()
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    assert runtime.fail_offsets_writes(1) == 1
    assert await commit(runtime, "g", 5) == E.NOT_COORDINATOR
    assert runtime.fail_offsets_writes(0) == 0
    assert await commit(runtime, "g", 6) == E.NONE
    assert fetched(runtime, "g") == 6
    await runtime.close()
    await manager.close()


async def test_loop_timer_keys_replace_and_cancel():
    timer = LoopTimer(asyncio.get_running_loop(), WallClock())
    fired: list[str] = []
    timer.schedule("a", 50, lambda: fired.append("first"))
    timer.schedule("a", 0, lambda: fired.append("second"))  # replaces the first
    timer.schedule("b", 0, lambda: fired.append("cancelled"))
    assert timer.cancel("b") is True and timer.cancel("b") is False
    for _ in range(100):  # bounded: the 50 ms timer would have fired long before this ends
        await asyncio.sleep(0.01)
        if fired and not timer.is_scheduled("a"):
            break
    await asyncio.sleep(0.1)
    assert fired == ["second"]


def join_request(group_id: str) -> m.JoinGroupRequest:
    protocol = m.JoinGroupRequest.JoinGroupRequestProtocol
    return m.JoinGroupRequest(group_id=group_id, session_timeout_ms=10_000, rebalance_timeout_ms=60_000,
                              member_id="", protocol_type="consumer", protocols=[protocol(name="range", metadata=b"")])


async def test_close_answers_parked_joins_not_coordinator(tmp_path):
    manager = LogManager(str(tmp_path))
    runtime = GroupRuntime(lambda p: manager.get_or_create(OFFSETS_TOPIC, p),
                           GroupConfig(offsets_topic_num_partitions=3, group_initial_rebalance_delay_ms=60_000))
    await runtime.start()
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    join = asyncio.ensure_future(runtime.join_group(RequestContext("c", "127.0.0.1", 3), join_request("g")))
    await asyncio.sleep(0)
    assert not join.done()  # parked behind the initial rebalance delay
    await runtime.close()
    result = await asyncio.wait_for(join, 5)
    assert result.error == E.NOT_COORDINATOR
    assert not runtime.active and runtime.heartbeat("g", "m", None, 1) == E.COORDINATOR_NOT_AVAILABLE
    await manager.close()


async def test_rebalances_and_group_sizes_reach_the_broker_metrics(tmp_path, caplog):
    from kcoord.coordinator.runtime import MetricsEvents
    from kcoord.observability.metrics import Metrics

    metrics = Metrics()
    manager = LogManager(str(tmp_path))
    runtime = GroupRuntime(lambda p: manager.get_or_create(OFFSETS_TOPIC, p), CONFIG,
                           events=MetricsEvents(metrics))
    await runtime.start()
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    caplog.set_level("WARNING", logger="kcoord.coordinator")  # metrics must not depend on the log level
    result = await runtime.join_group(RequestContext("c", "127.0.0.1", 3), join_request("metered"))
    assert result.error == E.NONE
    text = metrics.render_prometheus()
    assert 'kcoord_group_rebalances_total{cause="initial_join",group="metered"} 1' in text
    assert 'kcoord_group_members{group="metered"} 1' in text
    assert "Preparing to rebalance group metered" not in caplog.text  # INFO is filtered out as asked
    await runtime.close()
    await manager.close()


class SlowFsyncFS(FS):
    """The OS layer with a disk that stalls on fsync while `stall_s` is set (storage fsyncs off the loop)."""

    stall_s = 0.0

    def fsync(self, fd: int) -> None:
        time.sleep(self.stall_s)
        super().fsync(fd)


async def test_a_stalled_fsync_times_out_the_commit_after_offsets_commit_timeout(tmp_path):
    fs = SlowFsyncFS()
    manager = LogManager(str(tmp_path), fs=fs)
    config = GroupConfig(offsets_topic_num_partitions=3, offsets_commit_timeout_ms=200)
    runtime = GroupRuntime(lambda p: manager.get_or_create(OFFSETS_TOPIC, p), config)
    await runtime.start()
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    fs.stall_s = 1.5
    # Kafka's append timeout: REQUEST_TIMED_OUT, which a client sees as COORDINATOR_NOT_AVAILABLE.
    assert await commit(runtime, "g", 7) == E.COORDINATOR_NOT_AVAILABLE
    fs.stall_s = 0.0
    stalled = manager.get_or_create(OFFSETS_TOPIC, runtime.partition_for("g"))
    await asyncio.wait_for(stalled.sync(), 10)  # the stalled fsync has finished
    assert await commit(runtime, "g", 8) == E.NONE
    assert fetched(runtime, "g") == 8
    await runtime.close()
    await manager.close()


async def test_a_large_partition_loads_in_steps_while_the_loop_serves(tmp_path):
    """A partition far larger than one read of the log is replayed a chunk at a time, and its groups built a
    slice at a time: other work on the loop runs between the steps (Kafka loads off the request threads)."""
    import kcoord.coordinator.checkpoint_store as store
    from kcoord.coordinator import runtime as runtime_module
    from kcoord.protocol.consumer_offsets import (
        OffsetCommitValue,
        encode_offset_commit_key,
        encode_offset_commit_value,
    )
    from kcoord.protocol.records import build_batch

    manager = LogManager(str(tmp_path))
    plog = manager.get_or_create(OFFSETS_TOPIC, 0)
    value = encode_offset_commit_value(OffsetCommitValue(offset=5, commit_timestamp=1))
    for g in range(300):
        plog.append(build_batch([(encode_offset_commit_key(f"g{g}", "t", p), value) for p in range(10)]))
    plog.flush()
    old_chunk, old_slice = store.READ_CHUNK, runtime_module.LOAD_SLICE
    store.READ_CHUNK, runtime_module.LOAD_SLICE = 16 << 10, 50  # many steps for a small log
    try:
        runtime = GroupRuntime(lambda p: manager.get_or_create(OFFSETS_TOPIC, p),
                               GroupConfig(offsets_topic_num_partitions=1))
        await runtime.start()
        ticks = 0
        while not runtime.loaded_event.is_set():  # another task on the loop, meanwhile
            ticks += 1
            await asyncio.sleep(0)
        assert ticks > 10  # it ran between the steps of one partition's load
        assert runtime.fetch_offsets("g299", [("t", 9)], False).partitions[0].offset == 5
        assert len(runtime.list_groups(None)[1]) == 300
    finally:
        store.READ_CHUNK, runtime_module.LOAD_SLICE = old_chunk, old_slice
    await runtime.close()
    await manager.close()


async def test_a_held_partition_loads_once_released_and_reload_holds_it_again(tmp_path):
    """The admin endpoint's hold-load / release-load / reload, on the runtime itself."""
    manager = LogManager(str(tmp_path / "data"))
    runtime = runtime_over(manager)
    held = partition_for("g", CONFIG.offsets_topic_num_partitions)
    assert runtime.hold_load([held]) == [held]
    await runtime.start()
    for _ in range(20):
        await asyncio.sleep(0)
    assert not runtime.loaded_event.is_set()
    assert runtime.fetch_offsets("g", [("t", 0)], False).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert runtime.release_load() == []
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    assert await commit(runtime, "g", 4) == E.NONE

    runtime.hold_load([held])
    assert runtime.reload() == CONFIG.offsets_topic_num_partitions
    for _ in range(20):
        await asyncio.sleep(0)
    assert runtime.fetch_offsets("g", [("t", 0)], False).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert runtime.release_load([held]) == []
    await asyncio.wait_for(runtime.loaded_event.wait(), 10)
    assert fetched(runtime, "g") == 4  # replayed from the log again
    await runtime.close()
    await manager.close()
