"""FsyncPool: the threads that run group commits' fsyncs, answering the event loop once per batch.

A group commit round hands its blocking work (`run`) and what to do with the outcome (`done`, called on
the loop) to the pool. A thread that wakes takes every round queued by then, runs them one after another
and hands all their outcomes back to the loop in one callback. With many partitions syncing at once
(the coordinator's `__consumer_offsets`), the loop is woken once per batch instead of once per
partition, and no executor future or task is made per round: on a busy coordinator, each of those
hand-offs cost the event loop thread more than the fsync it waited for. Other threads take the rounds
queued while one is busy, so fsyncs still overlap.
"""
from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger("kcoord.storage")

Done = Callable[[BaseException | None], None]
_Round = tuple[asyncio.AbstractEventLoop, Callable[[], None], Done]
_STOP = None


class FsyncPool:
    def __init__(self, max_workers: int = 4, thread_name_prefix: str = "kcoord-fsync") -> None:
        self._max_workers = max_workers
        self._prefix = thread_name_prefix
        self._queue: queue.SimpleQueue[_Round | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []  # started with the first round
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, loop: asyncio.AbstractEventLoop, run: Callable[[], None], done: Done) -> None:
        """Run `run()` in a pool thread, then `done(None)` or `done(exception)` on `loop`."""
        if not self._threads:
            self._start()
        if self._closed:
            raise RuntimeError("fsync pool is shut down")
        self._queue.put((loop, run, done))

    def _start(self) -> None:
        with self._lock:
            if self._threads or self._closed:
                return
            self._threads = [threading.Thread(target=self._work, name=f"{self._prefix}_{i}", daemon=True)
                             for i in range(self._max_workers)]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        get, get_nowait = self._queue.get, self._queue.get_nowait
        stop = False
        while not stop:
            first = get()
            if first is _STOP:
                return
            batch = [first]
            # Its share of what is queued: the other threads take the rest, and the fsyncs overlap.
            for _ in range(-(-self._queue.qsize() // self._max_workers)):
                try:
                    more = get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:  # this thread's stop: every round queued before it is taken
                    stop = True
                    break
                batch.append(more)
            self._run_batch(batch)

    @staticmethod
    def _run_batch(batch: list[_Round]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Done, BaseException | None]]] = {}
        for loop, run, done in batch:
            try:
                run()
                error = None
            except BaseException as exc:  # reported to the round, which fails its waiters
                error = exc
            by_loop.setdefault(loop, []).append((done, error))
        for loop, outcomes in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, outcomes)
            except RuntimeError:  # the loop is closed: nobody is left to answer
                log.warning("fsync outcomes dropped: their event loop is closed")

    def shutdown(self, wait: bool = False) -> None:
        """Stop the threads once the rounds queued so far are run."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(_STOP)
        if wait:
            for thread in threads:
                thread.join()


def _deliver(outcomes: list[tuple[Done, BaseException | None]]) -> None:
    for done, error in outcomes:
        try:
            done(error)
        except Exception:
            log.exception("group commit round completion failed")
