"""LoopTimer on a hand-driven loop: lazy push-back must fire exactly what the last schedule asked for."""
from __future__ import annotations

import heapq
import itertools

from kcoord.coordinator.runtime import LoopTimer, WallClock


class _Handle:
    def __init__(self, when, fn, args):
        self.when, self.fn, self.args, self.cancelled = when, fn, args, False

    def cancel(self):
        self.cancelled = True


class FakeLoop:
    """Just what LoopTimer uses: time() and call_at(); advance() runs what is due, in order."""

    def __init__(self):
        self.now = 0.0
        self.armed = 0  # call_at calls, to see what a push-back costs
        self._heap: list = []
        self._seq = itertools.count()

    def time(self):
        return self.now

    def call_at(self, when, fn, *args):
        self.armed += 1
        handle = _Handle(when, fn, args)
        heapq.heappush(self._heap, (when, next(self._seq), handle))
        return handle

    def advance(self, seconds):
        self.advance_to(self.now + seconds)

    def advance_to(self, target):
        while self._heap and self._heap[0][0] <= target:
            when, _, handle = heapq.heappop(self._heap)
            self.now = max(self.now, when)
            if not handle.cancelled:
                handle.fn(*handle.args)
        self.now = target


def test_pushing_a_deadline_back_fires_the_last_callback_at_the_last_deadline():
    loop = FakeLoop()
    timer = LoopTimer(loop, WallClock())
    fired: list[tuple[str, float]] = []
    timer.schedule("hb", 10_000, lambda: fired.append(("first", loop.now)))
    for i in range(1, 4):  # heartbeats every 3 s push the session expiry back
        loop.advance(3.0)
        timer.schedule("hb", 10_000, lambda i=i: fired.append((f"beat{i}", loop.now)))
    assert loop.armed == 1  # no re-arming per heartbeat
    loop.advance_to(18.9)  # 10 s after the last heartbeat, at 9 s
    assert fired == [] and timer.is_scheduled("hb")
    loop.advance_to(19.0)
    assert fired == [("beat3", 19.0)] and not timer.is_scheduled("hb")


def test_an_earlier_deadline_replaces_at_once_and_cancel_stops_it():
    loop = FakeLoop()
    timer = LoopTimer(loop, WallClock())
    fired: list[str] = []
    timer.schedule("k", 5_000, lambda: fired.append("late"))
    timer.schedule("k", 1_000, lambda: fired.append("early"))
    loop.advance(1.0)
    assert fired == ["early"]
    loop.advance(10.0)
    assert fired == ["early"]  # the replaced timer never fires
    timer.schedule("k", 1_000, lambda: fired.append("cancelled"))
    loop.advance(0.5)
    timer.schedule("k", 3_000, lambda: fired.append("cancelled too"))  # pushed back, then cancelled
    assert timer.cancel("k") is True and timer.cancel("k") is False
    loop.advance(10.0)
    assert fired == ["early"]


def test_a_callback_may_schedule_its_own_key_again():
    loop = FakeLoop()
    timer = LoopTimer(loop, WallClock())
    fired: list[float] = []

    def tick():
        fired.append(loop.now)
        if len(fired) < 3:
            timer.schedule("tick", 1_000, tick)

    timer.schedule("tick", 1_000, tick)
    loop.advance(10.0)
    assert fired == [1.0, 2.0, 3.0] and not timer.is_scheduled("tick")


def test_push_moves_the_pending_timer_and_keeps_its_callback():
    """push(key, ms) is schedule(key, ms, <the pending callback>): later without re-arming, earlier
    re-armed at once, nothing when nothing is pending (the caller then schedules)."""
    loop = FakeLoop()
    timer = LoopTimer(loop, WallClock())
    fired: list[tuple[str, float]] = []
    assert timer.push("hb", 10_000) is False and not timer.is_scheduled("hb")
    timer.schedule("hb", 10_000, lambda: fired.append(("session", loop.now)))
    loop.advance(4.0)
    assert timer.push("hb", 10_000) is True and loop.armed == 1  # pushed back: no re-arming
    loop.advance_to(13.9)
    assert fired == []
    assert timer.push("hb", 1_000) is True and loop.armed == 2  # earlier: re-armed at once
    loop.advance_to(14.9)
    assert fired == [("session", 14.9)] and not timer.is_scheduled("hb")
