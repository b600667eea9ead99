"""Group commit and failure injection: fsyncs are shared, failures reach every waiter they cover,
nothing acknowledged is lost, and the log stays usable."""
import asyncio
import os
import shutil
import sys
import tempfile
import threading

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.protocol.records import decode_records
from kcoord.storage import FaultyFS, LogConfig, PartitionLog, StorageError
from kcoord.storage.fsync_pool import FsyncPool
from tests.storage.storage_helpers import batch

pytestmark = pytest.mark.timeout(30)
_executor = None  # what the logs' rounds run on: the loop's default executor, or storage's FsyncPool


def pytest_generate_tests(metafunc):
    if "round_executor" in metafunc.fixturenames:  # the state machines below pick their own
        metafunc.parametrize("round_executor", ["default executor", "fsync pool"], indirect=True)


@pytest.fixture(autouse=True)
def round_executor(request, monkeypatch):
    pool = FsyncPool(max_workers=2) if getattr(request, "param", None) == "fsync pool" else None
    monkeypatch.setattr(sys.modules[__name__], "_executor", pool)
    yield pool
    if pool is not None:
        pool.shutdown(wait=True)


def open_log(tmp_path, fs, **config):
    return PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(**config), fs=fs, fsync_executor=_executor)


def values(log) -> list[bytes]:
    return [r.value for _, b in log.batches() for r in decode_records(b)]


async def wait_for_round(log, n):
    while log.fsync_rounds < n:
        await asyncio.sleep(0.001)


async def test_committers_arriving_during_an_fsync_share_the_next_one(tmp_path):
    fs = FaultyFS()
    log = open_log(tmp_path, fs)
    fs.fsync_gate = threading.Event()
    first = asyncio.create_task(log.append_durable(batch(value=b"first")))
    await wait_for_round(log, 1)  # round 1 is now blocked inside fsync
    later = [asyncio.create_task(log.append_durable(batch(value=b"later%d" % i))) for i in range(50)]
    await asyncio.sleep(0.01)
    assert not any(t.done() for t in [first, *later])
    fs.fsync_gate.set()
    infos = await asyncio.gather(first, *later)
    assert log.fsync_rounds == 2
    assert sorted(i.base_offset for i in infos) == list(range(51))
    assert log.recovery_point == 51


async def test_sync_returns_at_once_when_already_durable(tmp_path):
    log = open_log(tmp_path, FaultyFS())
    await log.append_durable(batch())
    rounds = log.fsync_rounds
    await log.sync()
    assert log.fsync_rounds == rounds


async def test_fsync_failure_fails_every_covered_waiter_and_log_stays_usable(tmp_path):
    fs = FaultyFS()
    log = open_log(tmp_path, fs)
    for i in range(5):
        await log.append_durable(batch(value=b"acked%d" % i))
    fs.fail_next_fsync()
    results = await asyncio.gather(*(log.append_durable(batch(value=b"lost%d" % i)) for i in range(10)),
                                   return_exceptions=True)
    assert all(isinstance(r, StorageError) for r in results)
    assert isinstance(results[0].__cause__, OSError)
    # Unacknowledged, undurable bytes were cut away; the acknowledged ones stay.
    assert log.log_end_offset == log.recovery_point == 5
    info = await log.append_durable(batch(value=b"after"))
    assert info.base_offset == 5
    expected = [b"acked%d-0" % i for i in range(5)] + [b"after-0"]
    assert values(log) == expected
    log.close()
    assert values(open_log(tmp_path, FaultyFS())) == expected


async def test_append_cut_away_by_a_failure_cannot_be_synced_later(tmp_path):
    fs = FaultyFS()
    log = open_log(tmp_path, fs, flush_on_append=False)
    stale = log.append(batch())
    fs.fail_next_fsync()
    with pytest.raises(StorageError):
        await log.sync()
    log.append(batch())  # reuses offset 0 in a new generation
    with pytest.raises(StorageError, match="lost"):
        await log.sync(after=stale)


async def test_sync_future_resolves_once_durable_and_fails_for_a_lost_append(tmp_path):
    fs = FaultyFS()
    log = open_log(tmp_path, fs, flush_on_append=False)
    fs.fsync_gate = threading.Event()
    first = log.append(batch())
    durable = log.sync_future(first)
    await wait_for_round(log, 1)
    assert not durable.done()
    fs.fsync_gate.set()
    await durable
    assert log.recovery_point == 1
    assert log.sync_future(first).done()  # already durable: no fsync round
    stale = log.append(batch())
    fs.fail_next_fsync()
    with pytest.raises(StorageError):
        await log.sync_future(stale)
    log.append(batch())  # reuses offset 1 in a new generation
    with pytest.raises(StorageError, match="lost"):
        await log.sync_future(stale)


async def test_write_failure_is_reported_and_next_append_succeeds(tmp_path):
    fs = FaultyFS()
    log = open_log(tmp_path, fs)
    await log.append_durable(batch(value=b"one"))
    size = os.path.getsize(log.active_segment.log_path)
    fs.fail_next_write()
    with pytest.raises(StorageError) as err:
        await log.append_durable(batch(value=b"two"))
    assert isinstance(err.value.__cause__, OSError)
    assert os.path.getsize(log.active_segment.log_path) == size
    assert (await log.append_durable(batch(value=b"three"))).base_offset == 1
    assert values(log) == [b"one-0", b"three-0"]


async def test_torn_write_is_cut_back_and_recovery_finds_nothing_to_drop(tmp_path, caplog):
    fs = FaultyFS()
    log = open_log(tmp_path, fs)
    await log.append_durable(batch(value=b"one"))
    size = os.path.getsize(log.active_segment.log_path)
    fs.short_next_write(20, then_fail=True)
    with pytest.raises(StorageError):
        log.append(batch(value=b"two"))
    assert os.path.getsize(log.active_segment.log_path) == size
    await log.append_durable(batch(value=b"three"))
    log.close()
    again = open_log(tmp_path, FaultyFS())
    assert "dropped" not in caplog.text
    assert values(again) == [b"one-0", b"three-0"]


async def test_short_write_that_the_os_completes_later_is_finished(tmp_path):
    fs = FaultyFS()
    log = open_log(tmp_path, fs)
    fs.short_next_write(7, then_fail=False)
    await log.append_durable(batch(value=b"whole"))
    assert values(log) == [b"whole-0"]
    log.close()
    assert values(open_log(tmp_path, FaultyFS())) == [b"whole-0"]


async def test_without_flush_on_append_acks_do_not_wait_for_fsync(tmp_path):
    log = open_log(tmp_path, FaultyFS(), flush_on_append=False)
    await log.append_durable(batch())
    assert log.fsync_rounds == 0 and log.recovery_point == 0
    await log.sync()
    assert log.fsync_rounds == 1 and log.recovery_point == 1


async def test_new_segment_directory_entry_is_fsynced_with_its_data(tmp_path, monkeypatch):
    fs = FaultyFS()
    log = open_log(tmp_path, fs, segment_bytes=200)
    synced_dirs = []
    monkeypatch.setattr(fs, "fsync_dir", synced_dirs.append)
    await log.append_durable(batch(value=b"x" * 100))
    assert synced_dirs == [log.directory]  # the first batch of an epoch: leader-epoch-checkpoint renamed
    await log.append_durable(batch(value=b"y" * 100))  # rolls
    assert len(log.segments) == 2
    assert synced_dirs == [log.directory, log.directory]


async def test_sync_covers_what_was_appended_when_it_was_called(tmp_path):
    # A handler appends, calls sync(), and awaits it later (e.g. via gather): if a failure cuts
    # the append away in between, the sync must fail rather than vouch for the new tail.
    fs = FaultyFS()
    log = open_log(tmp_path, fs, flush_on_append=False)
    log.append(batch(value=b"doomed"))
    fs.fail_next_fsync()
    failing = asyncio.ensure_future(log.sync())
    pending = log.sync()  # called now, awaited after the failure
    with pytest.raises(StorageError):
        await failing
    log.append(batch(value=b"new tail"))
    with pytest.raises(StorageError, match="lost"):
        await pending
    await log.sync()
    assert values(log) == [b"new tail-0"]


class FailureMachine(RuleBasedStateMachine):
    """Concurrent durable appends with injected write/fsync failures and short writes, and
    reopenings: the log always holds exactly the acknowledged appends, in order."""

    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="kcoord-faults-")
        self.fs = FaultyFS()
        self.log = self._open()
        self.acked: list[bytes] = []
        self.counter = 0

    def _open(self):
        return PartitionLog(os.path.join(self.dir, "f-0"), "f", 0, LogConfig(segment_bytes=700), fs=self.fs)

    def teardown(self):
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(n=st.integers(min_value=1, max_value=8),
          fault=st.sampled_from([None, None, "write", "fsync", "short", "torn"]))
    def append_concurrently(self, n, fault):
        payloads = []
        for _ in range(n):
            self.counter += 1
            payloads.append(b"%d" % self.counter + b"." * (self.counter % 90))
        if fault == "write":
            self.fs.fail_next_write()
        elif fault == "fsync":
            self.fs.fail_next_fsync()
        elif fault in ("short", "torn"):
            self.fs.short_next_write(10, then_fail=fault == "torn")

        async def run():
            return await asyncio.gather(*(self.log.append_durable(batch(value=p)) for p in payloads),
                                        return_exceptions=True)

        results = asyncio.run(run())
        for payload, result in zip(payloads, results, strict=True):
            if isinstance(result, StorageError):
                continue
            assert not isinstance(result, BaseException), result
            assert result.base_offset == len(self.acked)
            self.acked.append(payload + b"-0")
        if fault is None or fault == "short":
            assert not any(isinstance(r, BaseException) for r in results)
        else:
            assert any(isinstance(r, StorageError) for r in results)

    @rule()
    def reopen(self):
        self.log.close()
        self.log = self._open()

    @invariant()
    def log_holds_exactly_the_acknowledged(self):
        assert values(self.log) == self.acked
        assert self.log.recovery_point == self.log.log_end_offset == len(self.acked)


class PooledFailureMachine(FailureMachine):
    """The same, with the rounds run by storage's FsyncPool (as a LogManager's logs are)."""

    def _open(self):
        if not hasattr(self, "pool"):
            self.pool = FsyncPool(max_workers=2)
        return PartitionLog(os.path.join(self.dir, "f-0"), "f", 0, LogConfig(segment_bytes=700), fs=self.fs,
                            fsync_executor=self.pool)

    def teardown(self):
        super().teardown()
        self.pool.shutdown(wait=True)


TestFailureMachine = FailureMachine.TestCase
TestFailureMachine.settings = settings(max_examples=20, stateful_step_count=15, deadline=None)
TestPooledFailureMachine = PooledFailureMachine.TestCase
TestPooledFailureMachine.settings = settings(max_examples=20, stateful_step_count=15, deadline=None)
