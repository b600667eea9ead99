"""A deterministic test context (Kafka's GroupMetadataManagerTestContext): a manual clock whose
`sleep(ms)` fires due timers, a writer that records appended records and completes (or fails) them on
demand, and helpers that send requests as a client would. No threads, no sockets."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.events import CoordinatorEvents
from kcoord.coordinator.group_manager import GroupMetadataManager
from kcoord.coordinator.record_batch import build_coordinator_batch
from kcoord.coordinator.records import Record
from kcoord.coordinator.results import (
    JoinGroupResult,
    LeaveGroupResult,
    OffsetCommit,
    OffsetCommitRequestPartition,
    RequestContext,
)
from kcoord.coordinator.service import GroupCoordinatorService
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.coordinator.timers import TimerQueue
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


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
    error: ErrorCode | None = None  # how it was completed
    source: object = None  # the records object the coordinator handed over

    def to_batch(self) -> bytes:
        """The v2 batch the real writer appends for it (transactional and control batches included)."""
        to_batch = getattr(self.source, "to_batch", None)
        return to_batch(0) if to_batch is not None else build_coordinator_batch(self.records)


@dataclass
class RecordingWriter:
    """Appends complete at once with `auto_error` (NONE by default) unless `auto` is False; then
    `complete_all()` / `fail_all(error)` resolve what is pending."""
    auto: bool = True
    auto_error: ErrorCode = ErrorCode.NONE
    appends: list[Append] = field(default_factory=list)

    def append(self, partition: int, records: list[Record], callback: Callable[[ErrorCode], None]) -> None:
        entry = Append(partition, list(records), callback, source=records)
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

    def durable(self) -> list[Append]:
        """The appends that completed without error, in order: what the log holds."""
        return [a for a in self.appends if a.done and a.error == ErrorCode.NONE]

    @staticmethod
    def _finish(entry: Append, error: ErrorCode) -> None:
        entry.done = True
        entry.error = error
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


class RecordingEvents(CoordinatorEvents):
    def __init__(self) -> None:
        self.rebalances: list[tuple[str, str]] = []
        self.sizes: list[tuple[str, int]] = []

    def rebalance(self, group_id: str, cause: str) -> None:
        self.rebalances.append((group_id, cause))

    def group_members(self, group_id: str, members: int) -> None:
        self.sizes.append((group_id, members))


class CoordinatorContext:
    def __init__(self, config: GroupConfig | None = None, **config_overrides) -> None:
        if config is None:
            config = GroupConfig(**config_overrides)
        self.config = config
        self.clock = ManualClock()
        self.writer = RecordingWriter()
        self.events = RecordingEvents()
        self.gc = GroupCoordinatorService(config, clock=self.clock, timer=self.clock.timers, writer=self.writer,
                                          events=self.events)

    def sleep(self, ms: int) -> None:
        self.clock.sleep(ms)

    # ------------------------------------------------------------ where a group's state is

    def shard(self, group_id: str) -> GroupCoordinatorShard:
        shard = self.gc.shard_for(group_id)
        assert isinstance(shard, GroupCoordinatorShard), shard
        return shard

    def manager(self, group_id: str) -> GroupMetadataManager:
        return self.shard(group_id).group_manager

    @property
    def groups(self) -> dict:
        """Every group of every live shard, by id (a fresh dict: read it, do not change it)."""
        return {gid: g for shard in self.gc.shards.values() for gid, g in shard.group_manager.groups.items()}

    def group(self, group_id: str):
        """The group object, or None."""
        return self.manager(group_id).groups.get(group_id)

    def offsets(self, group_id: str) -> dict:
        return self.shard(group_id).offset_manager.committed(group_id)

    def pending(self, group_id: str) -> dict:
        """(topic, partition) -> commits of the group in flight."""
        return self.shard(group_id).offset_manager.pending.get(group_id, {})

    # ------------------------------------------------------------ requests, as a client sends them

    def join(self, group_id: str, member_id: str = "", *, instance_id: str | None = None, version: int = 9,
             protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer",
             session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 60_000, client_id: str = "client",
             reason: str | None = None) -> Capture:
        cap = Capture()
        protocol = m.JoinGroupRequest.JoinGroupRequestProtocol
        request = m.JoinGroupRequest(
            group_id=group_id, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
            protocols=[protocol(name=n, metadata=d) for n, d in (protocols if protocols is not None
                                                                   else [("range", b"r")])],
            reason=reason)
        self.gc.join_group(RequestContext(client_id, "/127.0.0.1", version), request, cap)
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
        assignment = m.SyncGroupRequest.SyncGroupRequestAssignment
        request = m.SyncGroupRequest(
            group_id=group_id, generation_id=generation_id, member_id=member_id, group_instance_id=instance_id,
            protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=[assignment(member_id=k, assignment=v) for k, v in (assignments or {}).items()])
        self.gc.sync_group(RequestContext("client", "/127.0.0.1", 5), request, cap)
        return cap

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  instance_id: str | None = None) -> ErrorCode:
        return self.gc.heartbeat(group_id, member_id, instance_id, generation_id)

    def leave(self, group_id: str, *members: tuple[str, str | None, str | None]) -> LeaveGroupResult:
        member = m.LeaveGroupRequest.MemberIdentity
        request = m.LeaveGroupRequest(group_id=group_id, members=[
            member(member_id=mid, group_instance_id=iid, reason=why) for mid, iid, why in members])
        return self.gc.leave_group(RequestContext("client", "/127.0.0.1", 5), request)

    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                       offsets: list[OffsetCommitRequestPartition], callback, retention_time_ms: int = -1,
                       request_version: int = 9) -> None:
        self.gc.commit_offsets(OffsetCommit(group_id, member_id, instance_id, generation_id, list(offsets),
                                            retention_time_ms, request_version), callback)

    def fetch_offsets(self, group_id: str, partitions=None, require_stable: bool = False):
        return self.gc.fetch_offsets(group_id, partitions, require_stable)

    def delete_offsets(self, group_id: str, partitions, callback) -> None:
        self.gc.delete_offsets(group_id, partitions, callback)

    def delete_groups(self, group_ids, callback) -> None:
        self.gc.delete_groups(group_ids, callback)

    def describe_groups(self, group_ids, request_version: int = 5):
        return self.gc.describe_groups(group_ids, request_version)

    def list_groups(self, states_filter=None):
        error, groups = self.gc.list_groups(states_filter)
        assert error == ErrorCode.NONE, error
        return groups

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
        lsync = self.sync(group_id, leader, gen, {mid: mid.encode() for mid in ids})
        for mid in ids:
            if mid != leader:
                self.sync(group_id, mid, gen)
        assert lsync.result.error == ErrorCode.NONE
        return [leader] + [mid for mid in ids if mid != leader]
