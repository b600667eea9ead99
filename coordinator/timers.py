"""Keyed, replaceable timers on an injected clock.

The coordinator owns its timers: `TimerQueue` is a pure data structure (a heap plus a key index).
Scheduling a key that is already scheduled replaces it, which is how Kafka's purgatory "completes"
the previous expectation (e.g. each heartbeat pushes its member's expiry forward). The runtime only
has to call `run_due(clock.now_ms())` at `next_deadline_ms()`; tests do the same with a manual clock.
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class Timer(Protocol):
    def schedule(self, key: Hashable, delay_ms: int, callback: Callable[[], None]) -> None: ...
    def push(self, key: Hashable, delay_ms: int) -> bool: ...
    def cancel(self, key: Hashable) -> bool: ...


class TimerQueue:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[tuple[int, int, Hashable]] = []
        self._entries: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._seq = itertools.count()
        # Called with the new earliest deadline whenever one is scheduled, so a runtime can re-arm.
        self.on_schedule: Callable[[int], None] | None = None

    def schedule(self, key: Hashable, delay_ms: int, callback: Callable[[], None]) -> None:
        deadline = self._clock.now_ms() + max(0, int(delay_ms))
        seq = next(self._seq)
        self._entries[key] = (deadline, seq, callback)
        heapq.heappush(self._heap, (deadline, seq, key))
        if self.on_schedule is not None:
            self.on_schedule(deadline)

    def push(self, key: Hashable, delay_ms: int) -> bool:
        """`schedule(key, delay_ms, <its pending callback>)`: False (nothing scheduled) when none is pending.
        What a steady heartbeat does to its member's session timer, without making the callback again."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        self.schedule(key, delay_ms, entry[2])
        return True

    def cancel(self, key: Hashable) -> bool:
        return self._entries.pop(key, None) is not None

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._entries

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def __len__(self) -> int:
        return len(self._entries)

    def _drop_stale(self) -> None:
        heap, entries = self._heap, self._entries
        while heap:
            _, seq, key = heap[0]
            entry = entries.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)  # cancelled or replaced

    def next_deadline_ms(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Callable[[], None] | None:
        """Remove and return the earliest callback due at `now_ms`, or None."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        return self._entries.pop(key)[2]

    def run_due(self, now_ms: int) -> int:
        """Fire every timer due at `now_ms` in deadline order (including ones scheduled by callbacks)."""
        fired = 0
        while (callback := self.pop_due(now_ms)) is not None:
            callback()
            fired += 1
        return fired
