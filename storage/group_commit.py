"""Group commit: many sync() callers share few fsyncs.

While one fsync runs (in a worker thread; os.fsync releases the GIL), callers that arrive wait
for the next one, which then covers all of them. A failed fsync fails every waiter (the log has
already cut itself back to its last durable offset, so nothing after it is acknowledged later).
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from typing import Protocol

from storage.errors import StorageError

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
    def __init__(self, owner: Flushable, name: str, executor: Executor | None = None) -> None:
        self._owner = owner
        self._name = name
        self.executor = executor  # None: the loop's default executor
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self._task: asyncio.Task | None = None
        self.rounds = 0  # fsync rounds run (for tests and metrics)

    @property
    def busy(self) -> bool:
        return self._task is not None

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
            if self._task is None:
                self._task = loop.create_task(self._run(), name=f"group-commit {self._name}")
        return future

    async def idle(self) -> None:
        """Wait until no fsync round is running."""
        while self._task is not None:
            await asyncio.shield(self._task)

    def fail_all(self, error: StorageError) -> None:
        waiters, self._waiters = self._waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_exception(error)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        owner = self._owner
        try:
            while self._waiters:
                snapshot = owner.begin_flush()
                self.rounds += 1
                try:
                    await loop.run_in_executor(self.executor, snapshot.run)
                except Exception as exc:
                    owner.end_flush()
                    owner.flush_failed(snapshot, exc)
                    error = StorageError(f"{self._name}: fsync failed: {exc}")
                    error.__cause__ = exc
                    self.fail_all(error)
                    continue
                owner.end_flush()
                owner.flush_succeeded(snapshot)
                durable = owner.recovery_point
                pending = []
                for target, future in self._waiters:
                    if target > durable:
                        pending.append((target, future))
                    elif not future.done():
                        future.set_result(None)
                self._waiters = pending
        finally:
            self._task = None
