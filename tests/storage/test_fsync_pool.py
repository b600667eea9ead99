"""storage.FsyncPool: every round runs once and is answered on its loop, a failure only fails its own
round, rounds queued while a thread is busy are answered together, shutdown runs what is queued."""
import asyncio
import threading

import pytest

from kcoord.storage import FaultyFS, LogManager, StorageError
from kcoord.storage.fsync_pool import FsyncPool
from tests.storage.storage_helpers import batch

pytestmark = pytest.mark.timeout(30)


class RecordingLoop:
    """Stands in for the event loop: counts the hand-offs and runs them at once (in the pool's thread)."""

    def __init__(self):
        self.handoffs = 0
        self.lock = threading.Lock()

    def call_soon_threadsafe(self, callback, *args):
        with self.lock:
            self.handoffs += 1
            callback(*args)


def test_rounds_queued_while_the_thread_is_busy_are_answered_in_one_hand_off():
    pool, loop = FsyncPool(max_workers=1), RecordingLoop()
    started, gate, answers = threading.Event(), threading.Event(), []
    pool.submit(loop, lambda: (started.set(), gate.wait()), lambda error: answers.append(("first", error)))
    started.wait()
    for i in range(5):
        pool.submit(loop, lambda: None, lambda error, i=i: answers.append((i, error)))
    gate.set()
    pool.shutdown(wait=True)
    assert answers == [("first", None)] + [(i, None) for i in range(5)]
    assert loop.handoffs == 2  # the first round, then the five queued behind it together


def test_a_failing_round_fails_alone():
    pool, loop = FsyncPool(max_workers=1), RecordingLoop()
    started, gate, answers = threading.Event(), threading.Event(), []
    boom = OSError("fsync: no space")

    def fail():
        raise boom

    pool.submit(loop, lambda: (started.set(), gate.wait()), lambda error: answers.append(error))
    started.wait()
    pool.submit(loop, fail, lambda error: answers.append(error))
    pool.submit(loop, lambda: None, lambda error: answers.append(error))
    gate.set()
    pool.shutdown(wait=True)
    assert answers == [None, boom, None]


def test_after_shutdown_rounds_are_refused_and_a_closed_loop_is_skipped(caplog):
    pool = FsyncPool(max_workers=1)
    closed = asyncio.new_event_loop()
    closed.close()
    ran = threading.Event()
    pool.submit(closed, ran.set, lambda error: pytest.fail("answered on a closed loop"))
    pool.shutdown(wait=True)
    assert ran.is_set() and "event loop is closed" in caplog.text
    with pytest.raises(RuntimeError):
        pool.submit(RecordingLoop(), lambda: None, lambda error: None)


async def test_logs_of_a_manager_share_the_pool_and_each_waiter_is_answered(tmp_path):
    fs = FaultyFS()
    manager = LogManager(str(tmp_path), fs=fs)
    logs = [manager.get_or_create("t", p) for p in range(8)]
    infos = await asyncio.gather(*(lg.append_durable(batch(value=b"%d" % i)) for i in range(40)
                                   for lg in logs[i % 8:i % 8 + 1]))
    assert all(lg.recovery_point == lg.log_end_offset == 5 for lg in logs)
    assert sorted(i.base_offset for i in infos) == sorted(list(range(5)) * 8)
    fs.fail_next_fsync()
    results = await asyncio.gather(*(lg.append_durable(batch()) for lg in logs), return_exceptions=True)
    assert sum(isinstance(r, StorageError) for r in results) == 1  # only the round that failed
    assert sum(lg.recovery_point for lg in logs) == 5 * 8 + 7
    await manager.close()
