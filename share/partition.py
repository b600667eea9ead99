"""One share-partition (group, topic, partition): Kafka's SharePartition state machine
(core/src/main/java/kafka/server/share/SharePartition.java, InFlightState, RecordState), pure: no I/O,
no threads, time passed in as `now_ms`.

The in-flight window is [start_offset, end_offset): every offset in it is AVAILABLE, ACQUIRED,
ACKNOWLEDGED or ARCHIVED, with its delivery count and, while ACQUIRED, its member and acquisition-lock
deadline. Kafka keeps fetched batches and splits one into per-offset state when a request covers part
of it; kcoord keeps per-offset state from the start (the states are the same; the batches written are
the maximal runs of equal state).

    RecordState   how each operation treats it                              transitions
    AVAILABLE     acquire takes it (delivery count + 1)                     -> ACQUIRED
    ACQUIRED      acknowledge by its member; RENEW extends its lock;        -> AVAILABLE / ACKNOWLEDGED /
                  lock expiry and its member's release give it back           ARCHIVED
    ACKNOWLEDGED  terminal: never delivered again; the start offset moves past a prefix of these
    ARCHIVED      terminal (rejected, delivery limit reached, aborted transaction, gap in the log)

Operations compute a state change and the records that make it durable (kcoord.share.records,
through DurableShareState's snapshot rule). The caller writes the records before it answers, then calls
`replay` with them (or `rollback` if the write failed). As in Kafka:
- acknowledge and release_member change in-flight state at once but as a *transition* (Kafka's
  startStateTransition): the offsets can be neither acquired nor acknowledged again until the write is
  replayed (committed) or rolled back;
- acquire writes nothing (ACQUIRED is never durable) unless it archives offsets of aborted transactions
  or a gap in front of the fetched batches;
- lock expiry changes state at once and for good (releaseAcquisitionLockOnTimeout: a failed write
  only leaves the durable state behind).
The start offset moves only by replay: each record carries the start offset its change allows
(maybeUpdateCachedStateAndOffsets), so a fresh partition loading the records (`load`) rebuilds the
durable state -- acknowledged and archived offsets, the start offset, delivery counts -- and what was
acquired but not acknowledged at a crash comes back AVAILABLE with its last written delivery count.
"""
from __future__ import annotations

import bisect
import itertools
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kcoord.protocol.errors import ErrorCode
from kcoord.share import records as r
from kcoord.share.state import DEFAULT_SNAPSHOT_UPDATE_RECORDS, DurableShareState

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = r.AVAILABLE, r.ACQUIRED, r.ACKNOWLEDGED, r.ARCHIVED
TERMINAL = frozenset((ACKNOWLEDGED, ARCHIVED))
STATE_NAMES = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVED: "ARCHIVED"}

# ShareFetch / ShareAcknowledge acknowledge types (AcknowledgeType; 0 is a gap in the log, v2 adds RENEW)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_ACK_STATE = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, RELEASE: AVAILABLE, REJECT: ARCHIVED}

EARLIEST, LATEST = "earliest", "latest"  # share.auto.offset.reset (Kafka's default: latest)


@dataclass(frozen=True)
class ShareConfig:
    """The group's settings for its share-partitions (broker defaults, group-level overrides applied)."""
    delivery_count_limit: int = 5            # group.share.delivery.count.limit
    record_lock_duration_ms: int = 30_000    # group.share.record.lock.duration.ms
    max_record_locks: int = 2_000            # group.share.partition.max.record.locks
    snapshot_update_records: int = DEFAULT_SNAPSHOT_UPDATE_RECORDS


class InFlight:
    """One offset's in-flight state (Kafka's InFlightState). `before` holds the state a transition
    started from, `transition` its id, until the transition's write is replayed or rolled back."""

    __slots__ = ("state", "delivery_count", "member_id", "deadline_ms", "before", "transition")

    def __init__(self, state: int, delivery_count: int, member_id: str | None = None,
                 deadline_ms: int | None = None) -> None:
        self.state, self.delivery_count = state, delivery_count
        self.member_id, self.deadline_ms = member_id, deadline_ms
        self.before: tuple | None = None
        self.transition: int | None = None

    def view(self) -> tuple:
        return (self.state, self.delivery_count, self.member_id, self.deadline_ms)

    def __repr__(self) -> str:
        pending = f", pending {self.transition}" if self.transition is not None else ""
        return f"InFlight({STATE_NAMES[self.state]}, {self.delivery_count}, {self.member_id}{pending})"


class AcquiredRecords(NamedTuple):
    """ShareFetch's AcquiredRecords entry: offsets first..last delivered `delivery_count` times."""
    first_offset: int
    last_offset: int
    delivery_count: int


class Acquired(NamedTuple):
    acquired: list[AcquiredRecords]
    count: int
    records: list  # records to write (archived aborted / gap offsets); usually none


class Outcome(NamedTuple):
    """A partition's answer to acknowledge / release / expiry: its error code (ShareAcknowledge's
    per-partition ErrorCode), a message, and the records to write (none when the error is not NONE)."""
    error: int
    message: str | None
    records: list


_NO_OUTCOME = Outcome(ErrorCode.NONE, None, [])


class SharePartition:
    def __init__(self, group_id: str, topic_id: uuid.UUID, partition: int, config: ShareConfig = ShareConfig(),
                 *, leader_epoch: int = 0, state_epoch: int = 0) -> None:
        self.group_id, self.topic_id, self.partition = group_id, topic_id, partition
        self.config = config
        self.leader_epoch, self.state_epoch = leader_epoch, state_epoch
        self.durable = DurableShareState(group_id, topic_id, partition, config.snapshot_update_records)
        self.start_offset = 0
        self.end_offset = 0
        self._window: dict[int, InFlight] = {}  # offset -> state, for every offset in [start, end), in order
        self._transitions = itertools.count(1)
        self._pending: dict[int, list[int]] = {}  # transition id -> its offsets

    # ---------------------------------------------------------------- loading and initializing

    @classmethod
    def load(cls, group_id: str, topic_id: uuid.UUID, partition: int, records: Iterable,
             config: ShareConfig = ShareConfig(), *, leader_epoch: int = 0) -> SharePartition:
        """A share-partition rebuilt from its records (SharePartition.maybeInitialize over what the
        persister reads back): the durable state; offsets written AVAILABLE keep their delivery count,
        offsets of the window the records do not cover (acquired, never written) come back AVAILABLE
        with delivery count 0."""
        sp = cls(group_id, topic_id, partition, config, leader_epoch=leader_epoch)
        for record in records:
            sp.durable.replay(r.decoded(record))
        d = sp.durable
        if d.exists:
            sp.state_epoch = d.state_epoch
            sp.leader_epoch = max(sp.leader_epoch, d.leader_epoch)
            sp.start_offset = d.start_offset
            sp.end_offset = max([d.start_offset, *(o + 1 for o in d.states)])
            sp._window = {o: InFlight(*d.states.get(o, (AVAILABLE, 0)))
                          for o in range(sp.start_offset, sp.end_offset)}
        return sp

    @property
    def initialized(self) -> bool:
        return self.durable.exists

    def initialize(self, reset: str, log_start_offset: int, latest_offset: int, now_ms: int) -> list:
        """The record that starts a share-partition with no state: at the log start offset for
        share.auto.offset.reset=earliest, at the latest offset for latest (Kafka's default). Nothing if
        it has state. Replay it to apply it."""
        if reset not in (EARLIEST, LATEST):
            raise ValueError(f"share.auto.offset.reset {reset!r}")
        return self.initialize_at(log_start_offset if reset == EARLIEST else latest_offset, now_ms)

    def initialize_at(self, start_offset: int, now_ms: int) -> list:
        """The record that starts a share-partition with no state at `start_offset` (what a reset resolved
        to: earliest, latest, or by_duration's first offset at or after a timestamp). Nothing if it has
        state. Replay it to apply it."""
        if self.initialized:
            return []
        return [r.encode(self.durable.initial_record(start_offset, self.state_epoch, self.leader_epoch, now_ms))]

    def skip_to(self, offset: int, now_ms: int) -> list:
        """The records that move the start offset up to `offset` because the log no longer starts below it
        (retention or DeleteRecords took those records: Kafka's SharePartition moves its start offset to the
        log start offset); what was in flight below it is dropped. Replay them to apply them."""
        if not self.initialized or offset <= self.start_offset:
            return []
        complete = sum(1 for o, e in self._window.items() if o >= offset and e.state in TERMINAL)
        return [r.encode(self.durable.record_for(offset, {}, complete, self.leader_epoch, now_ms))]

    # ---------------------------------------------------------------- reading

    def state_of(self, offset: int) -> tuple | None:
        """(state, delivery count, member, lock deadline) of an in-flight offset; None outside the window."""
        entry = self._window.get(offset)
        return None if entry is None else entry.view()

    def in_flight(self) -> dict[int, tuple]:
        return {o: e.view() for o, e in self._window.items()}

    def acquired_by(self, member_id: str) -> list[int]:
        return [o for o, e in self._window.items() if e.state == ACQUIRED and e.member_id == member_id]

    def next_fetch_offset(self) -> int:
        """Where the next fetch should start (SharePartition.nextFetchOffset): the first AVAILABLE offset
        of the window (a redelivery), else the end of the window."""
        for offset, entry in self._window.items():
            if entry.state == AVAILABLE and entry.transition is None:
                return offset
        return self.end_offset

    def can_acquire(self) -> bool:
        """SharePartition.canAcquireRecords: there is a redelivery, or the window holds fewer than
        group.share.partition.max.record.locks offsets."""
        return self.initialized and (self.next_fetch_offset() != self.end_offset
                                     or self.end_offset - self.start_offset < self.config.max_record_locks)

    def next_lock_deadline(self) -> int | None:
        """The earliest acquisition-lock deadline (when the caller's timer should call expire_locks)."""
        deadlines = [e.deadline_ms for e in self._window.values() if e.state == ACQUIRED and e.transition is None]
        return min(deadlines) if deadlines else None

    # ---------------------------------------------------------------- acquire

    def acquire(self, member_id: str, batches: Sequence[tuple[int, int]], max_records: int, now_ms: int, *,
                aborted: Sequence[tuple[int, int]] = (), strict: bool = False) -> Acquired:
        """Acquire for `member_id` the offsets of the fetched log batches ([(base offset, last offset)],
        in order) that may be delivered (SharePartition.acquire): AVAILABLE offsets of the window first
        (redeliveries, in offset order), then offsets past the window. New offsets are limited by
        `max_records` and by what group.share.partition.max.record.locks leaves; as Kafka's batch mode
        does, the last new log batch is taken whole (`strict`: v2's record_limit mode, exactly
        `max_records`). ACKNOWLEDGED, ARCHIVED and offsets in a transition are skipped. `aborted`: the
        offset ranges of aborted transactions (read_committed); they are archived, never acquired."""
        if not self.initialized or max_records <= 0 or not batches:
            return Acquired([], 0, [])
        first, last = batches[0][0], batches[-1][1]
        deadline = now_ms + self.config.record_lock_duration_ms
        aborted_ranges = sorted(aborted)
        taken: list[int] = []
        archived: dict[int, tuple[int, int]] = {}
        budget = max_records
        for offset in range(max(first, self.start_offset), min(last + 1, self.end_offset)):
            if budget == 0:
                break
            entry = self._window[offset]
            if entry.state != AVAILABLE or entry.transition is not None:
                continue
            if _within(offset, aborted_ranges):
                entry.state = ARCHIVED
                archived[offset] = (ARCHIVED, entry.delivery_count)
                continue
            entry.state, entry.member_id, entry.deadline_ms = ACQUIRED, member_id, deadline
            entry.delivery_count += 1
            taken.append(offset)
            budget -= 1
        room = self.config.max_record_locks - (self.end_offset - self.start_offset)
        if last >= self.end_offset and min(budget, room) > 0:
            new_first = max(first, self.end_offset)
            for offset in range(self.end_offset, new_first):  # not in the log: nothing to deliver
                self._window[offset] = InFlight(ARCHIVED, 0)
                archived[offset] = (ARCHIVED, 0)
            stop = new_first + min(budget, room) - 1
            if not strict:
                stop = _end_of_batch(batches, stop)
            for offset in range(new_first, min(stop, last) + 1):
                if _within(offset, aborted_ranges):
                    self._window[offset] = InFlight(ARCHIVED, 0)
                    archived[offset] = (ARCHIVED, 0)
                else:
                    self._window[offset] = InFlight(ACQUIRED, 1, member_id, deadline)
                    taken.append(offset)
            self.end_offset = min(stop, last) + 1
        records = self._records(archived, None, now_ms) if archived else []
        return Acquired(_runs(taken, self._window), len(taken), records)

    # ---------------------------------------------------------------- acknowledge

    def acknowledge(self, member_id: str, batches: Sequence[tuple[int, int, Sequence[int]]],
                    now_ms: int) -> Outcome:
        """Acknowledge offsets [(first, last, acknowledge types)] for `member_id`
        (SharePartition.acknowledge): one type for the whole range or one per offset; ACCEPT
        acknowledges, RELEASE makes the offset AVAILABLE again (ARCHIVED once its delivery count reached
        group.share.delivery.count.limit), REJECT and GAP archive, RENEW keeps it ACQUIRED with a new lock
        (KIP-1222; nothing written). All or nothing: the first error answers for the partition and
        changes nothing. Ranges below the start offset are skipped (already archived).
        Errors as Kafka's: INVALID_REQUEST for an unknown type, types that do not fit the range, or
        offsets past the acquired records; INVALID_RECORD_STATE for offsets not in the window or not
        ACQUIRED by this member (including offsets acknowledged twice in one request)."""
        staged: dict[int, int] = {}
        renew: list[InFlight] = []
        for first, last, types in batches:
            error = self._check_ack_range(first, last, types)
            if error is not None:
                return error
            if last < self.start_offset:
                continue
            for offset in range(max(first, self.start_offset), last + 1):
                ack_type = types[0] if len(types) == 1 else types[offset - first]
                entry = self._window[offset]
                if entry.state != ACQUIRED or entry.member_id != member_id or entry.transition is not None \
                        or offset in staged:
                    return Outcome(ErrorCode.INVALID_RECORD_STATE,
                                   f"offset {offset} is not acquired by member {member_id}", [])
                if ack_type == RENEW:
                    renew.append(entry)
                    staged[offset] = ACQUIRED
                else:
                    staged[offset] = self._released_state(entry) if ack_type == RELEASE else _ACK_STATE[ack_type]
        for entry in renew:
            entry.deadline_ms = now_ms + self.config.record_lock_duration_ms
        changes = {o: s for o, s in staged.items() if s != ACQUIRED}
        return self._transition(changes, lambda entry: entry.delivery_count, now_ms)

    def _check_ack_range(self, first: int, last: int, types: Sequence[int]) -> Outcome | None:
        if first > last or not types or any(t not in _ACK_STATE and t != RENEW for t in types) \
                or len(types) not in (1, last - first + 1):
            return Outcome(ErrorCode.INVALID_REQUEST, f"invalid acknowledgement {first}-{last} {list(types)}", [])
        if last < self.start_offset:
            return None
        if not self._window:
            return Outcome(ErrorCode.INVALID_RECORD_STATE, f"offsets {first}-{last} are not in flight", [])
        if first >= self.end_offset or last >= self.end_offset:
            return Outcome(ErrorCode.INVALID_REQUEST, f"offsets {first}-{last} are past the acquired records", [])
        return None

    def _released_state(self, entry: InFlight) -> int:
        """RELEASE / lock expiry: AVAILABLE, or ARCHIVED once the delivery limit is reached
        (InFlightState.tryUpdateState)."""
        return ARCHIVED if entry.delivery_count >= self.config.delivery_count_limit else AVAILABLE

    # ---------------------------------------------------------------- release and expiry

    def release_member(self, member_id: str, now_ms: int) -> Outcome:
        """Release what `member_id` holds because its share session closed or it left the group
        (SharePartition.releaseAcquiredRecords): AVAILABLE again with the delivery count taken back
        (Kafka 4.1+, KAFKA-17541: fetched but never delivered), ARCHIVED below the start offset."""
        changes = {o: (ARCHIVED if o < self.start_offset else AVAILABLE) for o, e in self._window.items()
                   if e.state == ACQUIRED and e.member_id == member_id and e.transition is None}
        return self._transition(changes, lambda entry: max(entry.delivery_count - 1, 0), now_ms)

    def expire_locks(self, now_ms: int, due_by_ms: int | None = None) -> Outcome:
        """Acquisition locks due by `now_ms` (or `due_by_ms`: the test kit's timer control, which runs
        them out early) run out (SharePartition.releaseAcquisitionLockOnTimeout): their offsets become
        AVAILABLE for redelivery, or ARCHIVED once their delivery count reached
        group.share.delivery.count.limit. The change is immediate (not a transition)."""
        due = now_ms if due_by_ms is None else due_by_ms
        changed: dict[int, tuple[int, int]] = {}
        for offset, entry in self._window.items():
            if entry.state == ACQUIRED and entry.transition is None and entry.deadline_ms <= due:
                entry.state = self._released_state(entry)
                entry.member_id = entry.deadline_ms = None
                changed[offset] = (entry.state, entry.delivery_count)
        return Outcome(ErrorCode.NONE, None, self._records(changed, None, now_ms)) if changed else _NO_OUTCOME

    # ---------------------------------------------------------------- transitions, records, replay

    def _transition(self, changes: dict[int, int], count_of, now_ms: int) -> Outcome:
        if not changes:
            return _NO_OUTCOME
        tid = next(self._transitions)
        written: dict[int, tuple[int, int]] = {}
        for offset, state in changes.items():
            entry = self._window[offset]
            entry.before, entry.transition = entry.view(), tid
            entry.state, entry.delivery_count = state, count_of(entry)
            entry.member_id = entry.deadline_ms = None
            written[offset] = (state, entry.delivery_count)
        self._pending[tid] = sorted(changes)
        return Outcome(ErrorCode.NONE, None, self._records(written, tid, now_ms))

    def _records(self, changed: dict[int, tuple[int, int]], tid: int | None, now_ms: int) -> list:
        start = self._start_after(tid)
        complete = sum(1 for o, e in self._window.items() if o >= start and self._settled_state(e, tid) in TERMINAL)
        record = self.durable.record_for(start, changed, complete, self.leader_epoch, now_ms)
        return [r.encode(record, tid)]

    def _settled_state(self, entry: InFlight, tid: int | None) -> int:
        """An offset's state counting its transition only if it is `tid`'s own (others may roll back)."""
        return entry.state if entry.transition is None or entry.transition == tid else entry.before[0]

    def _start_after(self, tid: int | None) -> int:
        """Where the start offset may move once `tid`'s write is durable: past the prefix of ACKNOWLEDGED
        and ARCHIVED offsets (SharePartition.findLastOffsetAcknowledged)."""
        start = self.start_offset
        for offset, entry in self._window.items():
            if self._settled_state(entry, tid) not in TERMINAL:
                return offset
            start = offset + 1
        return start

    def replay(self, record) -> None:
        """Apply a record once its write is durable: the durable state takes it, a transition it carries
        commits, and the start offset moves up to the record's (the window drops what is below)."""
        decoded = r.decoded(record)
        self.durable.replay(decoded)
        tid = record.transition if isinstance(record, r.ShareWrite) else None
        if tid is not None:
            for offset in self._pending.pop(tid, ()):
                entry = self._window.get(offset)
                if entry is not None and entry.transition == tid:
                    entry.before = entry.transition = None
        self._move_start(decoded.start_offset)

    def rollback(self, records: Iterable) -> None:
        """The write of `records` failed: the transitions they carry are undone (Kafka's
        completeStateTransition(false)); offsets go back to their member, lock and delivery count (a
        lock that ran out meanwhile expires at the next expire_locks)."""
        for record in records:
            tid = record.transition if isinstance(record, r.ShareWrite) else None
            for offset in self._pending.pop(tid, ()) if tid is not None else ():
                entry = self._window.get(offset)
                if entry is not None and entry.transition == tid:
                    entry.state, entry.delivery_count, entry.member_id, entry.deadline_ms = entry.before
                    entry.before = entry.transition = None

    def _move_start(self, start: int) -> None:
        if start <= self.start_offset:
            return
        for offset in range(self.start_offset, min(start, self.end_offset)):
            del self._window[offset]
        self.start_offset = start
        self.end_offset = max(self.end_offset, start)


def _within(offset: int, ranges: list[tuple[int, int]]) -> bool:
    i = bisect.bisect_right(ranges, (offset, float("inf"))) - 1
    return i >= 0 and ranges[i][0] <= offset <= ranges[i][1]


def _end_of_batch(batches: Sequence[tuple[int, int]], offset: int) -> int:
    """The last offset of the fetched batch holding `offset` (the offset itself if none does)."""
    for base, last in batches:
        if base <= offset <= last:
            return last
    return offset


def _runs(offsets: list[int], window: dict[int, InFlight]) -> list[AcquiredRecords]:
    """Acquired offsets as AcquiredRecords: consecutive offsets with the same delivery count."""
    out: list[AcquiredRecords] = []
    for offset in sorted(offsets):
        count = window[offset].delivery_count
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
            out[-1] = out[-1]._replace(last_offset=offset)
        else:
            out.append(AcquiredRecords(offset, offset, count))
    return out
