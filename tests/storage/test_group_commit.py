"""Group commit and failure injection: fsyncs are shared, failures reach every waiter they cover,
nothing acknowledged is lost, and the log stays usable."""
import asyncio
import os
import threading

import pytest
from storage_helpers import batch

from protocol.records import decode_records, iter_batches
from storage import FaultyFS, LogConfig, PartitionLog, StorageError

pytestmark = pytest.mark.timeout(30)


def open_log(tmp_path, fs, **config):
    return PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(**config), fs=fs)


def values(log) -> list[bytes]:
    data = log.read(log.log_start_offset, 1 << 30) if log.log_end_offset > log.log_start_offset else b""
    return [r.value for _, _, b in iter_batches(data) for r in decode_records(b)]


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
    assert synced_dirs == []
    await log.append_durable(batch(value=b"y" * 100))  # rolls
    assert len(log.segments) == 2
    assert synced_dirs == [log.directory]
