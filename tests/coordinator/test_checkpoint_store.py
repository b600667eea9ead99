"""Checkpoints next to a real partition log: which start state a load gets, the tail it replays,
and the runtime writing checkpoints (at clean shutdown, after N records) and loading from them."""
from __future__ import annotations

import asyncio
import logging
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.coordinator import GroupConfig, checkpoint, checkpoint_store
from kcoord.coordinator.partition_state import PartitionState
from kcoord.coordinator.results import OffsetCommit
from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.runtime import GroupRuntime
from kcoord.protocol import consumer_offsets as co
from kcoord.protocol.records import build_batch
from kcoord.storage import LogConfig, LogManager
from tests.coordinator.test_checkpoint import NOW, histories

LOG = logging.getLogger("test.checkpoint_store")
TOPIC = "__consumer_offsets"


def _commit_record(group: str, partition: int, offset: int) -> tuple[bytes, bytes]:
    return (co.encode_offset_commit_key(group, "t", partition),
            co.encode_offset_commit_value(co.OffsetCommitValue(offset, "", 1000)))


@pytest.fixture
def plog(tmp_path):
    mgr = LogManager(str(tmp_path / "data"))
    yield mgr.get_or_create(TOPIC, 0)
    asyncio.run(mgr.close())


def _append(plog, *batches) -> None:
    for records in batches:
        plog.append(build_batch(records))
    plog.flush()


def _state(records) -> PartitionState:
    state = PartitionState()
    state.replay(records, LOG)
    return state


def test_tail_starts_mid_batch_and_stops_at_a_batch_boundary(plog):
    _append(plog, [_commit_record("g", 0, 1), _commit_record("g", 1, 2)], [_commit_record("g", 0, 3)],
            [_commit_record("g", 2, 4)])
    records, end = checkpoint_store.read_tail(plog, 1, up_to=3)
    assert records == [_commit_record("g", 1, 2), _commit_record("g", 0, 3)] and end == 3
    assert checkpoint_store.read_tail(plog, 0) == ([_commit_record("g", 0, 1), _commit_record("g", 1, 2),
                                                    _commit_record("g", 0, 3), _commit_record("g", 2, 4)], 4)
    assert checkpoint_store.read_tail(plog, 4) == ([], 4)


def test_the_folded_tail_is_the_last_value_per_key_of_the_tail(plog):
    _append(plog, [_commit_record("g", 0, 1), _commit_record("g", 1, 2)], [_commit_record("g", 0, 3)],
            [_commit_record("g", 2, 4), (co.encode_offset_commit_key("g", "t", 1), None)])
    for start, up_to in ((0, None), (1, 3), (2, None), (5, None)):
        records, end = checkpoint_store.read_tail(plog, start, up_to)
        assert checkpoint_store.read_tail_latest(plog, start, up_to) == (dict(records), end)
    state = PartitionState()
    state.replay_latest(checkpoint_store.read_tail_latest(plog, 0)[0], LOG)
    assert state == _state(checkpoint_store.read_tail(plog, 0)[0])


def test_valid_checkpoint_gives_its_state_and_offset(plog):
    first = [_commit_record("g", 0, 1), _commit_record("h", 0, 2)]
    _append(plog, first, [_commit_record("g", 0, 3)])
    checkpoint_store.write(plog, 0, _state(first), 2, 5000)
    state, start, written = checkpoint_store.start_state(plog, 0, now_ms=6000)
    assert (start, written) == (2, 5000) and state == _state(first)


def test_no_checkpoint_means_the_whole_log(plog):
    _append(plog, [_commit_record("g", 0, 1)])
    state, start, written = checkpoint_store.start_state(plog, 0, now_ms=6000)
    assert (start, written) == (plog.log_start_offset, None) and state == PartitionState()


def _rejected(plog, caplog, now_ms=6000) -> str:
    with caplog.at_level(logging.WARNING, "kcoord.coordinator.checkpoint"):
        state, start, written = checkpoint_store.start_state(plog, 0, now_ms)
    assert (state, start, written) == (PartitionState(), plog.log_start_offset, None)
    assert not os.path.exists(checkpoint_store.checkpoint_path(plog))  # deleted, so it cannot come back valid
    return caplog.text


def test_checkpoint_beyond_a_truncated_log_is_refused(plog, caplog):
    _append(plog, [_commit_record("g", 0, 1)])
    checkpoint_store.write(plog, 0, _state([_commit_record("g", 0, 9)]), 5, 5000)  # the log was cut below 5
    assert "beyond the log end 1" in _rejected(plog, caplog)


def test_checkpoint_below_the_log_start_is_refused(plog, caplog):
    _append(plog, [_commit_record("g", 0, 1)], [_commit_record("g", 0, 2)])
    checkpoint_store.write(plog, 0, PartitionState(), 0, 5000)
    plog.log_start_offset = 1  # as DeleteRecords or retention would move it
    assert "below the log start 1" in _rejected(plog, caplog)


def test_torn_checkpoint_is_refused(plog, caplog):
    _append(plog, [_commit_record("g", 0, 1)])
    checkpoint_store.write(plog, 0, _state([_commit_record("g", 0, 1)]), 1, 5000)
    path = checkpoint_store.checkpoint_path(plog)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    assert "torn" in _rejected(plog, caplog)


def test_checkpoint_older_than_half_the_tombstone_retention_is_refused(plog, caplog):
    _append(plog, [_commit_record("g", 0, 1)])
    checkpoint_store.write(plog, 0, PartitionState(), 0, 5000)
    late = 5000 + plog.config.delete_retention_ms // 2 + 1
    assert "half of delete.retention.ms" in _rejected(plog, caplog, now_ms=late)


def test_checkpoint_file_is_not_taken_for_a_segment(tmp_path):
    mgr = LogManager(str(tmp_path / "data"))
    plog = mgr.get_or_create(TOPIC, 0)
    _append(plog, [_commit_record("g", 0, 1)])
    checkpoint_store.write(plog, 0, _state([_commit_record("g", 0, 1)]), 1, 5000)
    asyncio.run(mgr.close())
    reopened = LogManager(str(tmp_path / "data")).get(TOPIC, 0)  # storage recovery leaves it alone
    assert reopened.log_end_offset == 1 and len(reopened.segments) == 1
    assert checkpoint_store.start_state(reopened, 0, now_ms=6000)[1] == 1


# ---------------------------------------------------------------- the runtime


def _runtime(mgr, **overrides) -> GroupRuntime:
    config = GroupConfig(offsets_topic_num_partitions=3, **overrides)
    return GroupRuntime(lambda p: mgr.get_or_create(TOPIC, p), config)


async def _commit(runtime, group: str, offsets: dict[int, int]) -> None:
    result = await runtime.commit_offsets(OffsetCommit(group, "", None, -1,
                                                       [P("t", p, o) for p, o in offsets.items()]))
    assert set(result.values()) == {0}


def _committed(runtime, group: str) -> dict[int, int]:
    fetched = runtime.fetch_offsets(group, None, False)
    return {p.partition: p.offset for p in fetched.partitions}


async def _started(mgr) -> GroupRuntime:
    runtime = _runtime(mgr)
    await runtime.start()
    await runtime.loaded_event.wait()
    return runtime


def test_runtime_checkpoints_at_shutdown_and_loads_only_the_tail_after_a_crash(tmp_path):
    data = str(tmp_path / "data")

    async def first_life() -> None:
        mgr = LogManager(data)
        runtime = await _started(mgr)
        await _commit(runtime, "g", {0: 5, 1: 7})
        await _commit(runtime, "g", {0: 6})
        await runtime.close()
        await mgr.close()

    async def second_life_crashes() -> None:
        mgr = LogManager(data)
        runtime = await _started(mgr)
        p = runtime.partition_for("g")
        assert runtime.checkpoints.covered[p][0] == mgr.get(TOPIC, p).log_end_offset  # nothing to replay
        assert _committed(runtime, "g") == {0: 6, 1: 7}
        await _commit(runtime, "g", {1: 8})  # durable, after the checkpoint; then the process dies
        for partition_log in mgr.logs():
            partition_log.flush()

    async def third_life() -> None:
        mgr = LogManager(data)
        runtime = await _started(mgr)
        p = runtime.partition_for("g")
        assert runtime.checkpoints.covered[p][0] == mgr.get(TOPIC, p).log_end_offset - 1  # the tail: 1 record
        assert _committed(runtime, "g") == {0: 6, 1: 8}
        await runtime.close()
        await mgr.close()

    asyncio.run(first_life())
    asyncio.run(second_life_crashes())
    asyncio.run(third_life())


def test_runtime_writes_a_checkpoint_after_n_durable_records(tmp_path):
    async def scenario() -> None:
        mgr = LogManager(str(tmp_path / "data"))
        runtime = await _started(mgr)
        runtime.checkpoints.interval_records = 3
        p = runtime.partition_for("g")
        for i in range(2):
            await _commit(runtime, "g", {i: i})
        await runtime.checkpoints.idle()
        assert p not in runtime.checkpoints.covered
        await _commit(runtime, "g", {2: 2})
        await runtime.checkpoints.idle()
        offset, _written = runtime.checkpoints.covered[p]
        with open(checkpoint_store.checkpoint_path(mgr.get(TOPIC, p)), "rb") as f:
            stored = checkpoint.decode(f.read(), p)
        assert stored.offset == offset == 3
        assert {tp[1] for tp in stored.state.offsets["g"]} == {0, 1, 2}
        await runtime.close()
        await mgr.close()

    asyncio.run(scenario())


def test_checkpoints_of_a_load_wait_until_every_partition_is_loaded(plog):
    from kcoord.coordinator.runtime.checkpoints import Checkpointer
    from kcoord.coordinator.testing import ManualClock

    _append(plog, [_commit_record("g", 0, 1), _commit_record("g", 1, 2)])
    loaded = []

    async def scenario() -> None:
        checkpoints = Checkpointer(lambda p: plog, ManualClock(), interval_records=1000)
        def load_partition(p, records, state, keep):  # the log's records come replayed into the state
            loaded.append((list(records), set(state.offsets["g"]), keep))

        checkpoints.load(0, load_partition)
        await asyncio.sleep(0)
        assert checkpoints._worker is None and not os.path.exists(checkpoint_store.checkpoint_path(plog))
        _append(plog, [_commit_record("g", 2, 3)])  # written meanwhile: the checkpoint covers it too
        checkpoints.start()
        await checkpoints.idle()
        assert checkpoints.covered[0][0] == 3

    asyncio.run(scenario())
    assert loaded == [([], {("t", 0), ("t", 1)}, True)]  # kept: to be written
    with open(checkpoint_store.checkpoint_path(plog), "rb") as f:
        stored = checkpoint.decode(f.read(), 0)
    assert stored.offset == 3 and set(stored.state.offsets["g"]) == {("t", 0), ("t", 1), ("t", 2)}


# ---------------------------------------------------------------- compaction


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.data())
def test_compaction_after_a_checkpoint_changes_nothing_a_load_sees(records, data):
    """Compaction may drop records below (and superseded ones above) the checkpoint offset; a load
    from the checkpoint still equals a full replay. Once tombstones can be dropped, the checkpoint
    is too old to be trusted and the load replays the (compacted) log, with the same result."""
    split = data.draw(st.integers(0, len(records)))
    batch = data.draw(st.integers(1, 5))
    with tempfile.TemporaryDirectory() as tmp:
        config = LogConfig(cleanup_policy="compact", segment_bytes=2000, min_cleanable_dirty_ratio=0.0)
        mgr = LogManager(tmp, default_config=config)
        plog = mgr.get_or_create(TOPIC, 0)
        _append(plog, *(records[i:min(i + batch, split)] for i in range(0, split, batch)))
        checkpoint_store.write(plog, 0, _state(checkpoint_store.read_tail(plog, 0)[0]), split, NOW)
        _append(plog, *(records[i:i + batch] for i in range(split, len(records), batch)))
        plog.roll()  # every record in a cleanable segment
        plog.compact(now_ms=NOW)  # tombstones kept, stamped with their delete horizon
        state, start, written = checkpoint_store.start_state(plog, 0, now_ms=NOW)
        assert (start, written) == (split, NOW)
        state.replay(checkpoint_store.read_tail(plog, start)[0], LOG)
        assert state == _state(records)

        late = NOW + config.delete_retention_ms + 1
        plog.compact(now_ms=late)  # past the horizon: tombstones go
        state, start, written = checkpoint_store.start_state(plog, 0, now_ms=late)
        assert written is None
        state.replay(checkpoint_store.read_tail(plog, start)[0], LOG)
        assert state == _state(records)
        asyncio.run(mgr.close())


def test_a_checkpoint_waits_for_a_quiet_moment_and_close_does_not(plog):
    """A requested checkpoint runs once the coordinator has written nothing for quiet_ms (its read and
    fold share the event loop with the requests); close() does not wait for that."""
    from kcoord.coordinator.runtime.checkpoints import Checkpointer
    from kcoord.coordinator.testing import ManualClock

    _append(plog, [_commit_record("g", 0, 1)])

    async def busy_then_quiet() -> None:
        checkpoints = Checkpointer(lambda p: plog, ManualClock(), interval_records=1)
        checkpoints.quiet_ms = 1000
        checkpoints.start()
        checkpoints.after_durable_write(0)  # requests it: one durable record, the interval
        for _ in range(30):  # writes keep coming
            await asyncio.sleep(0.01)
            checkpoints.after_durable_write(0)
            assert 0 not in checkpoints.covered
        await checkpoints.idle()  # they stopped
        assert checkpoints.covered[0][0] == 1

    async def closing_while_busy() -> None:
        checkpoints = Checkpointer(lambda p: plog, ManualClock(), interval_records=1)
        checkpoints.quiet_ms = checkpoints.max_defer_ms = 600_000
        checkpoints.start()
        checkpoints.after_durable_write(0)
        await asyncio.sleep(0.05)
        await asyncio.wait_for(checkpoints.close([0]), 30)  # not the ten minutes
        assert checkpoints.covered[0][0] == 1

    asyncio.run(busy_then_quiet())
    os.remove(checkpoint_store.checkpoint_path(plog))
    asyncio.run(closing_while_busy())
