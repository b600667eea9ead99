"""The runtime's timers: keyed, replaceable timers on the event loop (the clock: kcoord.coordinator.common)."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kcoord.coordinator.common.runtime import WallClock as WallClock  # re-exported: the runtime's clock

log = logging.getLogger("kcoord.coordinator.runtime")


class _Pending:
    __slots__ = ("when", "callback", "handle", "armed_at")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when            # loop time the timer is due
        self.callback = callback
        self.handle: asyncio.TimerHandle | None = None
        self.armed_at = when        # loop time `handle` fires (<= when)


class LoopTimer:
    """Keyed, replaceable timers. Scheduling a key again replaces its previous timer.

    Replacing a timer with a later one (every heartbeat pushes its member's expiry forward) only
    records the new deadline and callback: the armed loop timer, when it fires early, re-arms itself
    for the deadline. So a heartbeat costs no cancel + call_at, and what fires, and when, is exactly
    what the last `schedule` asked for. An earlier deadline re-arms at once.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, clock) -> None:
        self._loop = loop
        self._clock = clock  # kept for the interface; delays are relative, so loop time alone places them
        self._pending: dict[Any, _Pending] = {}

    def schedule(self, key, delay_ms: int, callback: Callable[[], None]) -> None:
        when = self._loop.time() + (delay_ms / 1000.0 if delay_ms > 0 else 0.0)
        entry = self._pending.get(key)
        if entry is not None:
            if entry.armed_at <= when:
                entry.when = when
                entry.callback = callback
                return
            entry.handle.cancel()
        entry = _Pending(when, callback)
        entry.handle = self._loop.call_at(when, self._fire, key, entry)
        self._pending[key] = entry

    def push(self, key, delay_ms: int) -> bool:
        """`schedule(key, delay_ms, <its pending callback>)`: False (nothing scheduled) when none is pending.
        What a steady heartbeat does to its member's session timer, without making the callback again."""
        entry = self._pending.get(key)
        if entry is None:
            return False
        when = self._loop.time() + (delay_ms / 1000.0 if delay_ms > 0 else 0.0)
        if entry.armed_at <= when:
            entry.when = when
        else:
            self.schedule(key, delay_ms, entry.callback)
        return True

    def cancel(self, key) -> bool:
        entry = self._pending.pop(key, None)
        if entry is None:
            return False
        entry.handle.cancel()
        return True

    def is_scheduled(self, key) -> bool:
        return key in self._pending

    def fire_now(self, key) -> bool:
        """Run `key`'s pending timer now (tests' timer control); False if none is pending."""
        entry = self._pending.pop(key, None)
        if entry is None:
            return False
        entry.handle.cancel()
        entry.callback()
        return True

    def pending(self, key):
        """An opaque token of `key`'s pending timer (None if none): equal tokens mean the same timer."""
        return self._pending.get(key)

    def cancel_all(self) -> None:
        for entry in self._pending.values():
            entry.handle.cancel()
        self._pending.clear()

    def _fire(self, key, entry: _Pending) -> None:
        if self._pending.get(key) is not entry:
            return  # replaced or cancelled meanwhile (its handle was cancelled too; belt and braces)
        if entry.when > entry.armed_at:  # pushed back since it was armed
            entry.armed_at = entry.when
            entry.handle = self._loop.call_at(entry.when, self._fire, key, entry)
            return
        del self._pending[key]
        try:
            entry.callback()
        except Exception:  # a timer must never take the loop down
            log.exception("coordinator timer %r failed", key)
