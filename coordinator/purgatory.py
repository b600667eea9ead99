"""The join purgatory: DelayedJoin and InitialDelayedJoin, on keyed timers.

Kafka parks a rebalance's join phase as a delayed operation watched under the group's key. Every
JoinGroup (and every departure) calls `check_and_complete(group_key)`, which completes the phase as
soon as all known members have rejoined; otherwise the operation's timer completes it at the
rebalance timeout. A fired or checked operation re-resolves its group by id, so an operation whose
group was unloaded or deleted does nothing.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kcoord.coordinator.group_metadata import GroupMetadata
from kcoord.coordinator.timers import Timer


def join_timer_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


class JoinPhase(Protocol):
    """What a delayed join calls back: the rebalance step (kcoord.coordinator.rebalance.Rebalancer)."""

    groups: dict[str, GroupMetadata]  # the shard's groups table, to re-resolve the group by id
    join_purgatory: JoinPurgatory

    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool: ...

    def on_expire_join(self, group: GroupMetadata) -> None: ...

    def on_complete_join(self, group: GroupMetadata) -> None: ...


class DelayedJoin:
    """Completes when every known member has rejoined, or when `delay_ms` (the group's rebalance
    timeout) runs out; at completion dynamic members that did not rejoin are dropped."""

    def __init__(self, rebalancer: JoinPhase, group: GroupMetadata, delay_ms: int) -> None:
        self.rebalancer = rebalancer
        self.group = group
        self.delay_ms = delay_ms
        self.completed = False

    def _current(self) -> bool:
        return self.rebalancer.groups.get(self.group.group_id) is self.group

    def try_complete(self) -> bool:
        if not self._current():
            return False
        return self.rebalancer.try_complete_join(self.group, self.force_complete)

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self.completed = True
        self.rebalancer.join_purgatory.unwatch(self.group.group_id, self)
        if self._current():
            self.on_complete()
        return True

    def on_expiration(self) -> None:
        self.rebalancer.on_expire_join(self.group)

    def on_complete(self) -> None:
        self.rebalancer.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """KIP-134: the first rebalance of an empty group waits `group.initial.rebalance.delay.ms` so that
    members starting together land in one generation. While new members keep arriving the wait is
    extended by up to the configured delay each time, never beyond the rebalance timeout."""

    def __init__(self, rebalancer: JoinPhase, group: GroupMetadata, configured_rebalance_delay_ms: int,
                 delay_ms: int, remaining_ms: int) -> None:
        super().__init__(rebalancer, group, delay_ms)
        self.configured_rebalance_delay_ms = configured_rebalance_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False  # only the timer completes it

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.configured_rebalance_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            self.rebalancer.join_purgatory.try_complete_else_watch(InitialDelayedJoin(
                self.rebalancer, group, self.configured_rebalance_delay_ms, delay, remaining), group.group_id)
        else:
            self.rebalancer.on_complete_join(group)


class JoinPurgatory:
    def __init__(self, timer: Timer) -> None:
        self._timer = timer
        self._watched: dict[str, DelayedJoin] = {}

    def try_complete_else_watch(self, op: DelayedJoin, group_key: str) -> bool:
        if op.try_complete():
            return True
        self._watched[group_key] = op
        self._timer.schedule(join_timer_key(group_key), op.delay_ms, lambda: self._expire(op))
        return False

    def check_and_complete(self, group_key: str) -> bool:
        op = self._watched.get(group_key)
        return op is not None and op.try_complete()

    def unwatch(self, group_key: str, op: DelayedJoin) -> None:
        if self._watched.get(group_key) is op:
            del self._watched[group_key]
            self._timer.cancel(join_timer_key(group_key))

    def watched(self, group_key: str) -> DelayedJoin | None:
        return self._watched.get(group_key)

    def _expire(self, op: DelayedJoin) -> None:
        if op.force_complete():
            op.on_expiration()
