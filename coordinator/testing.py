"""A deterministic test context: a manual clock whose `sleep(ms)` fires due timers, and a writer
that records appended records and completes (or fails) them on demand. No threads, no sockets."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from coordinator.config import GroupConfig
from coordinator.group_coordinator import GroupCoordinator
from coordinator.records import Record
from coordinator.results import JoinGroupResult, LeaveGroupResult, SyncGroupResult
from coordinator.timers import TimerQueue
from protocol.errors import ErrorCode


class ManualClock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms
        self.timers = TimerQueue(self)

    def now_ms(self) -> int:
        return self._now

    def sleep(self, ms: int) -> None:
        """Advance time by `ms`, firing each due timer at its own deadline, in order."""
        target = self._now + ms
        while (deadline := self.timers.next_deadline_ms()) is not None and deadline <= target:
            self._now = max(self._now, deadline)
            self.timers.run_due(self._now)
        self._now = target


@dataclass
class Append:
    partition: int
    records: list[Record]
    callback: Callable[[ErrorCode], None]
    done: bool = False


@dataclass
class RecordingWriter:
    """Appends complete at once with `auto_error` (NONE by default) unless `auto` is False; then
    `complete_all()` / `fail_all(error)` resolve what is pending."""
    auto: bool = True
    auto_error: ErrorCode = ErrorCode.NONE
    appends: list[Append] = field(default_factory=list)

    def append(self, partition: int, records: list[Record], callback: Callable[[ErrorCode], None]) -> None:
        entry = Append(partition, list(records), callback)
        self.appends.append(entry)
        if self.auto:
            self._finish(entry, self.auto_error)

    @property
    def records(self) -> list[Record]:
        return [r for a in self.appends for r in a.records]

    def pending(self) -> list[Append]:
        return [a for a in self.appends if not a.done]

    def complete_all(self) -> None:
        for entry in self.pending():
            self._finish(entry, ErrorCode.NONE)

    def fail_all(self, error: ErrorCode) -> None:
        for entry in self.pending():
            self._finish(entry, error)

    def clear(self) -> None:
        self.appends.clear()

    @staticmethod
    def _finish(entry: Append, error: ErrorCode) -> None:
        entry.done = True
        entry.callback(error)


class Capture:
    """A callback that remembers what it was called with."""

    def __init__(self) -> None:
        self.calls: list = []

    def __call__(self, result) -> None:
        self.calls.append(result)

    @property
    def called(self) -> bool:
        return bool(self.calls)

    @property
    def result(self):
        assert len(self.calls) == 1, f"expected one call, got {self.calls}"
        return self.calls[0]


class CoordinatorContext:
    def __init__(self, config: GroupConfig | None = None, **config_overrides) -> None:
        if config is None:
            config = GroupConfig(**config_overrides)
        self.config = config
        self.clock = ManualClock()
        self.writer = RecordingWriter()
        self.gc = GroupCoordinator(config, clock=self.clock, timer=self.clock.timers, writer=self.writer)

    def sleep(self, ms: int) -> None:
        self.clock.sleep(ms)

    def join(self, group_id: str, member_id: str = "", *, instance_id: str | None = None, version: int = 9,
             protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer",
             session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 60_000, client_id: str = "client",
             reason: str | None = None) -> Capture:
        cap = Capture()
        self.gc.handle_join_group(group_id, member_id, instance_id, version >= 4 and instance_id is None, client_id,
                                  "/127.0.0.1", rebalance_timeout_ms if version >= 1 else session_timeout_ms,
                                  session_timeout_ms, protocol_type,
                                  protocols if protocols is not None else [("range", b"r")], reason, version, cap)
        return cap

    def join_new_member(self, group_id: str, **kw) -> Capture:
        """The v4+ dance: an empty member id gets MEMBER_ID_REQUIRED, then rejoin with the given id."""
        first = self.join(group_id, **kw)
        assert first.result.error == ErrorCode.MEMBER_ID_REQUIRED, first.result
        return self.join(group_id, first.result.member_id, **kw)

    def sync(self, group_id: str, member_id: str, generation_id: int, assignments: dict[str, bytes] | None = None,
             instance_id: str | None = None, protocol_type: str | None = None,
             protocol_name: str | None = None) -> Capture:
        cap = Capture()
        self.gc.handle_sync_group(group_id, generation_id, member_id, protocol_type, protocol_name, instance_id,
                                  assignments or {}, cap)
        return cap

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  instance_id: str | None = None) -> ErrorCode:
        cap = Capture()
        self.gc.handle_heartbeat(group_id, member_id, instance_id, generation_id, cap)
        return cap.result

    def leave(self, group_id: str, *members: tuple[str, str | None, str | None]) -> LeaveGroupResult:
        cap = Capture()
        self.gc.handle_leave_group(group_id, list(members), cap)
        return cap.result

    def stable_group(self, group_id: str, n: int = 1, **kw) -> list[str]:
        """Drive a group of `n` dynamic members to Stable; returns member ids, leader first."""
        caps = [self.join_new_member(group_id, client_id=f"c{i}", **kw) for i in range(n)]
        # Joiners after the first extend the initial delay (KIP-134): wait until the join completes.
        for _ in range(100):
            if all(c.called for c in caps):
                break
            self.sleep(max(self.config.group_initial_rebalance_delay_ms, 1))
        results: list[JoinGroupResult] = [c.result for c in caps]
        leader = results[0].leader_id
        gen = results[0].generation_id
        ids = [r.member_id for r in results]
        lsync = self.sync(group_id, leader, gen, {m: m.encode() for m in ids})
        for m in ids:
            if m != leader:
                self.sync(group_id, m, gen)
        assert lsync.result.error == ErrorCode.NONE
        return [leader] + [m for m in ids if m != leader]

    def sync_result(self, cap: Capture) -> SyncGroupResult:
        return cap.result
