"""Group commit: many sync() callers share few fsyncs.

While one fsync runs (in a worker thread; os.fsync releases the GIL), callers that arrive wait
for the next one, which then covers all of them. A failed fsync fails every waiter (the log has
already cut itself back to its last durable offset, so nothing after it is acknowledged later).
Rounds are loop callbacks, not a task, and storage's FsyncPool answers many logs' rounds at once:
with many logs syncing together, the event loop's share of each round is what limits a busy broker.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from concurrent.futures import Executor
from typing import Protocol

from kcoord.storage.errors import StorageError
from kcoord.storage.fsync_pool import FsyncPool

log = logging.getLogger("kcoord.storage")


class FlushSnapshot(Protocol):
    target: int  # log end offset the fsync covers

    def run(self) -> None:
        """The blocking fsyncs (runs in a worker thread)."""


class Flushable(Protocol):
    recovery_point: int
    generation: int

    def begin_flush(self) -> FlushSnapshot: ...
    def flush_succeeded(self, snapshot: FlushSnapshot) -> None: ...
    def flush_failed(self, snapshot: FlushSnapshot, exc: BaseException) -> None: ...
    def end_flush(self) -> None: ...


class GroupCommit:
    """Rounds of one fsync each, one at a time: a round starts on the loop tick after its first waiter
    (so a tick's appends share it) and, when it ends, the next one starts if waiters are left."""

    def __init__(self, owner: Flushable, name: str, executor: FsyncPool | Executor | None = None) -> None:
        self._owner = owner
        self._name = name
        self.executor = executor  # an FsyncPool (storage's own), another executor, or None: the loop's default
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy = False  # a round is scheduled or running
        self._idle: asyncio.Future | None = None  # resolved when the rounds stop
        self.rounds = 0  # fsync rounds run (for tests and metrics)

    @property
    def busy(self) -> bool:
        return self._busy

    async def wait(self, target: int, generation: int) -> None:
        """Return once offsets below `target`, appended in `generation`, are durable."""
        if target > self._owner.recovery_point:
            await self.future(target, generation)

    def future(self, target: int, generation: int) -> asyncio.Future:
        """`wait` as a future, for callers that add a done callback rather than await (no task)."""
        owner = self._owner
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if target <= owner.recovery_point:
            future.set_result(None)
        elif generation != owner.generation:
            future.set_exception(StorageError(
                f"{self._name}: data up to offset {target} was lost to an earlier storage failure"))
        else:
            self._waiters.append((target, future))
            if not self._busy or self._loop is not loop:  # (a round left behind by a closed loop never ends)
                self._busy = True
                self._loop = loop
                loop.call_soon(self._start_round)
        return future

    async def idle(self) -> None:
        """Wait until no fsync round is running."""
        while self._busy:
            if self._idle is None:
                self._idle = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._idle)

    def fail_all(self, error: StorageError) -> None:
        waiters, self._waiters = self._waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_exception(error)

    def _start_round(self) -> None:
        if not self._waiters:
            self._stop()
            return
        try:
            snapshot = self._owner.begin_flush()
        except BaseException as exc:  # e.g. the log was closed meanwhile: nothing to fsync
            self.fail_all(_failure(self._name, exc))
            self._stop()
            return
        self.rounds += 1
        done = functools.partial(self._round_done, snapshot)
        executor, loop = self.executor, self._loop
        try:
            if isinstance(executor, FsyncPool):
                executor.submit(loop, snapshot.run, done)
            else:
                loop.run_in_executor(executor, snapshot.run).add_done_callback(
                    lambda f: done(asyncio.CancelledError() if f.cancelled() else f.exception()))
        except BaseException as exc:  # the pool is shut down, the loop closing
            done(exc)

    def _round_done(self, snapshot: FlushSnapshot, error: BaseException | None) -> None:
        owner = self._owner
        owner.end_flush()
        if error is not None:
            owner.flush_failed(snapshot, error)
            self.fail_all(_failure(self._name, error))
        else:
            owner.flush_succeeded(snapshot)
            durable = owner.recovery_point
            pending = []
            for target, future in self._waiters:
                if target > durable:
                    pending.append((target, future))
                elif not future.done():
                    future.set_result(None)
            self._waiters = pending
        if self._waiters:
            self._start_round()
        else:
            self._stop()

    def _stop(self) -> None:
        self._busy = False
        idle, self._idle = self._idle, None
        if idle is not None and not idle.done():
            idle.set_result(None)


def _failure(name: str, exc: BaseException) -> StorageError:
    error = StorageError(f"{name}: fsync failed: {exc}")
    error.__cause__ = exc
    return error
