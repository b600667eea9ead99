"""The replication state of one local replica of a partition: the one object the data plane asks.

Kafka's `Partition` (core/src/main/scala/kafka/cluster/Partition.scala) with its `Replica` follower
states (cluster/Replica.scala), without locks, sockets or timers: every input is a call with the time in
it (`now_ms`), every output a return value. It owns the role (leader / follower / none), the leader and
partition epochs, the ISR as the leader sees it, the high watermark, each follower's fetch state and
the acks=all produces waiting for the ISR. It reads the local log through `LocalLog` (the log end, its
start and its leader epochs, kcoord.storage's PartitionLog) and never writes it.

Kafka's rules kept here (Kafka 4.0, the trunk of October 2024):
- The ISR is one of three states (Partition.scala's PartitionState): committed; a pending expansion,
  whose new member counts at once for the high watermark and acks=all (the "maximal" ISR, KIP-497:
  more members only makes both stricter); a pending shrink, whose members stay until the change is
  committed. One change at a time: nothing is proposed while one is in flight.
- A follower joins when its log end reaches the high watermark and the start of the current leader
  epoch (isFollowerInSync) and the metadata allows it (isReplicaIsrEligible, injected). It leaves when
  it has not been caught up to the leader's log end for more than replica.lag.time.max.ms
  (getOutOfSyncReplicas through ReplicaState.isCaughtUp).
- The high watermark is the smallest log end over the maximal ISR and over the caught-up eligible
  followers outside it (maybeIncrementLeaderHW), and only ever goes up on a leader. Since KIP-966
  (Kafka 3.7; still so in 4.x) it does not move at all while the committed ISR is smaller than the
  effective min ISR, min(min.insync.replicas, replicas): an acks=all write then waits (and times out)
  instead of being acknowledged by fewer replicas than promised. `freeze_hwm_below_min_isr=False`
  keeps the rule of Kafka 3.6 and before reachable, where such a write was acknowledged with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND.
- acks=all: refused before the append with NOT_ENOUGH_REPLICAS when the committed ISR is below the
  effective min ISR (appendRecordsToLeader); after the append it completes when the high watermark
  reaches the required offset, with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal ISR is then below
  it (checkEnoughReplicasReachOffset, DelayedProduce). A replica that stops leading fails every waiting
  write with NOT_LEADER_OR_FOLLOWER: a deposed leader never acknowledges.
- Fetch from a follower: its current leader epoch is checked first (older: FENCED_LEADER_EPOCH, newer:
  UNKNOWN_LEADER_EPOCH, checkCurrentLeaderEpoch), then the role, then whether it is a replica, then its
  last fetched epoch against our epochs (DivergingEpoch), then the offset range; only a fetch that
  reads updates the follower's state (Partition.fetchRecords, Replica.updateFetchStateOrThrow).
- The follower's high watermark is the leader's, bounded by its own log (UnifiedLog.updateHighWatermark
  from ReplicaFetcherThread.processPartitionData); its truncation follows the leader's epochs
  (kcoord.cluster.leader_epochs.truncation_point).
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kcoord.cluster.leader_epochs import (
    EpochEndOffset,
    EpochHistory,
    TruncationState,
    check_last_fetched_epoch,
    local_end_offset_for_epoch,
    truncation_point,
)
from kcoord.cluster.partition_change import NO_BROKER_EPOCH, IsrChangeRequest, acks_all_error
from kcoord.cluster.partition_state import PartitionRegistration
from kcoord.protocol.errors import ErrorCode

NO_EPOCH = -1  # an absent current leader epoch / last fetched epoch in a request (Fetch before v9 / v12)
UNKNOWN_OFFSET = -1  # a follower's log end before its first fetch to this leader (UnifiedLog.UnknownOffset)

# AlterPartition errors after which the leader goes back to its committed ISR: the controller says the
# change was not applied (Partition.handleAlterPartitionError).
_REVERT = {ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA}
# ... after which it keeps the pending state until new metadata arrives (make_leader / make_follower):
# its view is out of date, or (NEW_LEADER_ELECTED) the change was written but moved the leadership away.
_AWAIT_METADATA = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED,
}


class Role(enum.Enum):
    NONE = "none"  # not started, stopped, or deleted: answers nothing (NOT_LEADER_OR_FOLLOWER)
    LEADER = "leader"
    FOLLOWER = "follower"


class LocalLog(Protocol):
    """What this object reads of the local log (kcoord.storage.log.PartitionLog has all three)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def leader_epochs(self) -> EpochHistory: ...


@dataclass(slots=True)
class FollowerState:
    """The leader's view of one follower (Replica.scala's ReplicaState)."""

    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = 0  # our log end when its previous fetch arrived
    last_fetch_time_ms: int = 0
    # the latest time t at which it had fetched up to our log end as of t (see on_follower_fetch)
    last_caught_up_time_ms: int = 0
    broker_epoch: int | None = None  # from its last fetch (Fetch v15+ ReplicaState.ReplicaEpoch)

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """ReplicaState.isCaughtUp: at our log end, or caught up within the last `max_lag_ms`."""
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms


@dataclass(frozen=True, slots=True)
class CommittedIsr:
    """The ISR as last written to the partition's registration."""

    isr: frozenset[int]

    @property
    def maximal(self) -> frozenset[int]:
        return self.isr

    @property
    def in_flight(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class _PendingIsrChange:
    """An ISR change sent (`request`), not yet committed; `committed` is what to go back to."""

    request: IsrChangeRequest
    committed: CommittedIsr

    @property
    def isr(self) -> frozenset[int]:
        return self.committed.isr

    @property
    def in_flight(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class PendingExpandIsr(_PendingIsrChange):
    """An expansion in flight: the new member already counts (maximal ISR)."""

    new_member: int

    @property
    def maximal(self) -> frozenset[int]:
        return self.committed.isr | {self.new_member}


@dataclass(frozen=True, slots=True)
class PendingShrinkIsr(_PendingIsrChange):
    """A shrink in flight: the removed members still count until it is committed."""

    removed: frozenset[int]

    @property
    def maximal(self) -> frozenset[int]:
        return self.committed.isr


IsrState = CommittedIsr | PendingExpandIsr | PendingShrinkIsr


@dataclass(frozen=True, slots=True)
class FetchDecision:
    """The leader's answer to one follower Fetch of this partition.

    `error` NONE and `diverging_epoch` None: read from the fetch offset up to the log end and answer with
    `high_watermark` (the value before this fetch moved it, as Kafka's LogReadInfo carries). A diverging
    epoch is answered with no records. `isr_change`: an expansion to write (compare-and-set on the
    partition's key) and report with on_isr_change_committed / on_isr_change_failed."""

    error: ErrorCode = ErrorCode.NONE
    diverging_epoch: EpochEndOffset | None = None
    high_watermark: int = 0
    log_start_offset: int = 0
    isr_change: IsrChangeRequest | None = None
    high_watermark_advanced: bool = False


@dataclass(eq=False, slots=True)
class PendingAck:
    """An appended acks=all batch waiting for the ISR (DelayedProduce's per-partition status).
    `error` is None while it waits; then NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND or
    NOT_LEADER_OR_FOLLOWER. A caller that gives up (request timeout) calls `expire`."""

    required_offset: int
    error: ErrorCode | None = None

    @property
    def done(self) -> bool:
        return self.error is not None


def _always_eligible(replica_id: int, broker_epoch: int | None) -> bool:
    return True


@dataclass(eq=False)
class PartitionReplication:
    """One local replica's replication state (see the module docstring). Not thread-safe: one owner.

    `is_isr_eligible(replica_id, broker_epoch_from_its_fetch)` is the metadata's say on an ISR member
    (Partition.isReplicaIsrEligible): registered, not fenced, not shutting down, and the broker epoch
    of its fetches either unknown (-1) or its registered one.
    `high_watermark` starts from what the node last knew (Kafka's replication-offset-checkpoint)."""

    local_id: int
    log: LocalLog
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    is_isr_eligible: Callable[[int, int | None], bool] = _always_eligible
    local_broker_epoch: int = NO_BROKER_EPOCH
    freeze_hwm_below_min_isr: bool = True
    high_watermark: int = 0

    role: Role = field(default=Role.NONE, init=False)
    leader_id: int = field(default=-1, init=False)
    leader_epoch: int = field(default=-1, init=False)  # Kafka's INITIAL_LEADER_EPOCH - 1: none seen
    partition_epoch: int = field(default=0, init=False)
    replicas: tuple[int, ...] = field(default=(), init=False)
    isr_state: IsrState = field(default=CommittedIsr(frozenset()), init=False)
    # the log end when this replica became leader at leader_epoch; None unless leading
    leader_epoch_start_offset: int | None = field(default=None, init=False)
    followers: dict[int, FollowerState] = field(default_factory=dict, init=False)
    _waiting: list[PendingAck] = field(default_factory=list, init=False)
    _completed: list[PendingAck] = field(default_factory=list, init=False)

    # -- what the rest of the broker asks --------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR (what Metadata reports). Empty on a follower, as in Kafka."""
        return self.isr_state.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr_state.maximal

    @property
    def effective_min_isr(self) -> int:
        """min(min.insync.replicas, replication factor) (Partition.effectiveMinIsr)."""
        return min(self.min_insync_replicas, max(len(self.replicas), 1))

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr_state.isr) < self.effective_min_isr

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of our last batch, what a follower's Fetch carries (NO_EPOCH for an empty cache)."""
        latest = self.log.leader_epochs.latest_epoch
        return NO_EPOCH if latest is None else latest

    def check_current_leader_epoch(self, current_leader_epoch: int, *, require_leader: bool = True) -> ErrorCode:
        """A request naming the leader epoch its sender knows (Fetch, ListOffsets, OffsetForLeaderEpoch):
        older than ours FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, NO_EPOCH skips the check; then
        NOT_LEADER_OR_FOLLOWER if we must lead and do not, or serve nothing (Partition.getLocalLog)."""
        if current_leader_epoch != NO_EPOCH:
            if current_leader_epoch < self.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch > self.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if self.role is Role.NONE or (require_leader and not self.is_leader):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def offset_for_leader_epoch(
        self, current_leader_epoch: int, epoch: int, *, require_leader: bool = True
    ) -> tuple[ErrorCode, EpochEndOffset]:
        """OffsetForLeaderEpoch for this partition (Partition.lastOffsetForLeaderEpoch): the end of
        `epoch` in our log, UNDEFINED epoch and offset when the log cannot tell. A follower's request
        (replica id >= 0) may be answered by a follower (`require_leader=False`), as Kafka does."""
        error = self.check_current_leader_epoch(current_leader_epoch, require_leader=require_leader)
        if error is not ErrorCode.NONE:
            return error, EpochEndOffset()
        found = local_end_offset_for_epoch(self.log.leader_epochs, epoch, self.log.log_end_offset)
        return ErrorCode.NONE, found or EpochEndOffset()

    def fetchable_end(self, *, from_follower: bool) -> int:
        """How far a Fetch may read (ReplicaManager.fetchMessages' isolation): a follower to the log end,
        a consumer to the high watermark (read_committed: the caller bounds it by the last stable
        offset too, which the transaction state knows)."""
        return self.log.log_end_offset if from_follower else self.high_watermark

    # -- becoming leader / follower / nothing ---------------------------------------------------

    def make_leader(self, registration: PartitionRegistration, now_ms: int) -> bool:
        """Lead the partition as `registration` says (Partition.makeLeader). Returns whether this replica
        was not leading before. A registration older than what we have (its partition epoch) is ignored.

        On a new leader epoch the epoch's start offset is our log end now: followers must reach it to
        join the ISR, and every follower's state is reset (an ISR member counts as caught up now, others
        not at all). The log must already stamp new batches with this epoch and have an entry for it
        starting at the log end (Kafka's maybeAssignEpochStartOffset), so that a follower holding a
        later epoch than any of ours still finds where to truncate."""
        if registration.leader != self.local_id:
            raise ValueError(f"make_leader on {self.local_id} for a registration led by {registration.leader}")
        if registration.partition_epoch < self.partition_epoch:
            return False
        was_leader = self.is_leader
        new_epoch = registration.leader_epoch > self.leader_epoch
        self.role = Role.LEADER
        self.leader_id = self.local_id
        self._set_assignment(registration.replicas, registration.isr)
        if new_epoch:
            start = self.log.log_end_offset
            for replica_id, state in self.followers.items():
                in_isr = replica_id in registration.isr
                if not was_leader:
                    state.log_end_offset = state.log_start_offset = UNKNOWN_OFFSET
                    state.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
                    state.broker_epoch = None
                else:
                    state.last_fetch_leader_log_end_offset = start
                state.last_fetch_time_ms = now_ms if (in_isr and was_leader) else 0
                state.last_caught_up_time_ms = now_ms if in_isr else 0
            self.leader_epoch = registration.leader_epoch
            self.leader_epoch_start_offset = start
        self.partition_epoch = registration.partition_epoch
        self._maybe_increment_high_watermark(now_ms)
        return not was_leader

    def make_follower(self, registration: PartitionRegistration) -> bool:
        """Follow `registration.leader` (Partition.makeFollower). Returns whether the leader epoch is new:
        then the fetcher restarts (and truncates before it fetches). Every acks=all write still waiting
        fails with NOT_LEADER_OR_FOLLOWER. A registration older than ours is ignored."""
        if registration.leader == self.local_id:
            raise ValueError(f"make_follower on {self.local_id}, which the registration makes leader")
        if registration.partition_epoch < self.partition_epoch:
            return False
        new_epoch = registration.leader_epoch > self.leader_epoch
        self.role = Role.FOLLOWER
        self.leader_id = registration.leader
        self.leader_epoch = registration.leader_epoch
        self.leader_epoch_start_offset = None
        self.partition_epoch = registration.partition_epoch
        self.replicas = registration.replicas
        self.isr_state = CommittedIsr(frozenset())  # a follower keeps no ISR (updateAssignmentAndIsr)
        self.followers.clear()
        self._fail_all_waiting()
        return new_epoch

    def stop(self) -> None:
        """Serve nothing any more: the replica was removed or deleted, or this node lost its lease (it
        drops every role at once). Waiting acks=all writes fail with NOT_LEADER_OR_FOLLOWER."""
        self.role = Role.NONE
        self.leader_id = -1
        self.leader_epoch_start_offset = None
        self.isr_state = CommittedIsr(frozenset())
        self.followers.clear()
        self._fail_all_waiting()

    def _set_assignment(self, replicas: Iterable[int], isr: Iterable[int]) -> None:
        """Partition.updateAssignmentAndIsr on a leader: a state for every other replica, the committed
        ISR replacing any pending change."""
        self.replicas = tuple(replicas)
        others = [r for r in self.replicas if r != self.local_id]
        for r in others:
            self.followers.setdefault(r, FollowerState())
        for r in [r for r in self.followers if r not in others]:
            del self.followers[r]
        self.isr_state = CommittedIsr(frozenset(isr))

    # -- leader: produce ------------------------------------------------------------------------

    def acks_all_check(self) -> ErrorCode:
        """Before appending an acks=all produce: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS when the
        committed ISR is below the effective min ISR (Partition.appendRecordsToLeader), else NONE.
        Other acks are not limited by the ISR."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return acks_all_error(len(self.isr_state.isr), self.effective_min_isr)

    def on_leader_append(self, now_ms: int) -> bool:
        """The log grew (any acks): with nobody else to wait for the high watermark may follow it.
        Returns whether it advanced."""
        return self._maybe_increment_high_watermark(now_ms)

    def wait_for(self, required_offset: int) -> PendingAck:
        """An acks=all write appended up to `required_offset` - 1 (Kafka's requiredOffset is the last
        offset + 1) waits until the high watermark reaches `required_offset` (DelayedProduce's
        tryCompleteElseWatch). It may be done at once (check `done`); otherwise it is handed out by
        `take_completed` once done."""
        ack = PendingAck(required_offset)
        if not self.is_leader:
            ack.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            return ack
        if not self._try_complete(ack):
            self._waiting.append(ack)
        return ack

    def expire(self, ack: PendingAck) -> None:
        """The produce timed out (the caller answers REQUEST_TIMED_OUT): stop watching it."""
        if ack in self._waiting:
            self._waiting.remove(ack)

    def take_completed(self) -> list[PendingAck]:
        """The waiting writes done since the last call, in the order they completed."""
        done, self._completed = self._completed, []
        return done

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _try_complete(self, ack: PendingAck) -> bool:
        """Partition.checkEnoughReplicasReachOffset."""
        if self.high_watermark < ack.required_offset:
            return False
        enough = len(self.isr_state.maximal) >= self.effective_min_isr
        ack.error = ErrorCode.NONE if enough else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True

    def _complete_waiting(self) -> None:
        still = []
        for ack in self._waiting:
            if self._try_complete(ack):
                self._completed.append(ack)
            else:
                still.append(ack)
        self._waiting = still

    def _fail_all_waiting(self) -> None:
        for ack in self._waiting:
            ack.error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            self._completed.append(ack)
        self._waiting = []

    # -- leader: follower fetches ---------------------------------------------------------------

    def on_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        current_leader_epoch: int,
        last_fetched_epoch: int,
        now_ms: int,
        *,
        follower_log_start_offset: int = UNKNOWN_OFFSET,
        broker_epoch: int = NO_BROKER_EPOCH,
    ) -> FetchDecision:
        """A Fetch of this partition from follower `replica_id` (Partition.fetchRecords with
        updateFetchState, then updateFollowerFetchState, maybeExpandIsr, maybeIncrementLeaderHW)."""
        log = self.log
        hw_before, start, end = self.high_watermark, log.log_start_offset, log.log_end_offset
        error = self.check_current_leader_epoch(current_leader_epoch, require_leader=True)
        if error is ErrorCode.NONE and replica_id not in self.followers:
            # not a replica (yet): a reassignment this leader has not seen, or a stranger
            error = ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch != NO_EPOCH else (
                ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if error is not ErrorCode.NONE:
            return FetchDecision(error, high_watermark=hw_before, log_start_offset=start)
        error, diverging = check_last_fetched_epoch(log.leader_epochs, start, end, last_fetched_epoch, fetch_offset)
        if error is ErrorCode.NONE and diverging is None and not start <= fetch_offset <= end:
            error = ErrorCode.OFFSET_OUT_OF_RANGE
        if error is not ErrorCode.NONE or diverging is not None:
            return FetchDecision(error, diverging, high_watermark=hw_before, log_start_offset=start)

        state = self.followers[replica_id]
        previous_end = state.log_end_offset
        # Replica.updateFetchStateOrThrow: caught up now if it fetched from our log end; caught up at
        # its previous fetch if it now fetches from where our log ended then.
        if fetch_offset >= end:
            state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_log_end_offset:
            state.last_caught_up_time_ms = max(state.last_caught_up_time_ms, state.last_fetch_time_ms)
        state.log_start_offset = follower_log_start_offset
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_log_end_offset = max(end, state.last_fetch_leader_log_end_offset)
        state.last_fetch_time_ms = now_ms
        state.broker_epoch = broker_epoch

        isr_change = self._maybe_expand_isr(replica_id)
        advanced = previous_end != fetch_offset and self._maybe_increment_high_watermark(now_ms)
        return FetchDecision(high_watermark=hw_before, log_start_offset=start, isr_change=isr_change,
                             high_watermark_advanced=advanced)

    def _in_sync(self, replica_id: int) -> bool:
        """Partition.isFollowerInSync: at the high watermark and inside the current leader epoch."""
        end = self.followers[replica_id].log_end_offset
        return (self.is_leader and self.leader_epoch_start_offset is not None and end >= self.high_watermark
                and end >= self.leader_epoch_start_offset)

    def _maybe_expand_isr(self, replica_id: int) -> IsrChangeRequest | None:
        """Partition.maybeExpandIsr / canAddReplicaToIsr / prepareIsrExpand."""
        current = self.isr_state
        if not isinstance(current, CommittedIsr) or replica_id in current.isr:
            return None
        if not self.is_isr_eligible(replica_id, self.followers[replica_id].broker_epoch):
            return None
        if not self._in_sync(replica_id):
            return None
        request = self._isr_request(current.isr | {replica_id})
        self.isr_state = PendingExpandIsr(request, current, new_member=replica_id)
        return request

    # -- leader: ISR shrink and the outcome of ISR changes ----------------------------------------

    def out_of_sync_replicas(self, now_ms: int) -> frozenset[int]:
        """Partition.getOutOfSyncReplicas: committed ISR members (not us) not caught up within
        replica.lag.time.max.ms; none while a change is in flight."""
        if not self.is_leader or self.isr_state.in_flight:
            return frozenset()
        end = self.log.log_end_offset
        return frozenset(
            r for r in self.isr_state.isr - {self.local_id}
            if r not in self.followers
            or not self.followers[r].is_caught_up(end, now_ms, self.replica_lag_time_max_ms))

    def maybe_shrink_isr(self, now_ms: int) -> IsrChangeRequest | None:
        """Partition.maybeShrinkIsr (ReplicaManager runs it every replica.lag.time.max.ms / 2): the ISR
        without the out-of-sync members, to write by compare-and-set; None if nothing to remove or a
        change is in flight. The removed members keep counting until the change is committed."""
        current = self.isr_state
        removed = self.out_of_sync_replicas(now_ms)
        if not removed or not isinstance(current, CommittedIsr):
            return None
        request = self._isr_request(current.isr - removed)
        self.isr_state = PendingShrinkIsr(request, current, removed=removed)
        return request

    def _isr_request(self, isr: frozenset[int]) -> IsrChangeRequest:
        """The AlterPartition data for `isr` (prepareIsrExpand / prepareIsrShrink with
        addBrokerEpochToIsr): ordered as the replicas, each member's broker epoch as its fetches
        gave it, ours as registered, NO_BROKER_EPOCH where unknown."""
        ordered = [r for r in self.replicas if r in isr]
        epochs = {r: self.local_broker_epoch if r == self.local_id else self._broker_epoch_of(r) for r in ordered}
        return IsrChangeRequest(self.local_id, self.leader_epoch, self.partition_epoch, tuple(ordered),
                                isr_broker_epochs=epochs)

    def _broker_epoch_of(self, replica_id: int) -> int:
        state = self.followers.get(replica_id)
        return NO_BROKER_EPOCH if state is None or state.broker_epoch is None else state.broker_epoch

    def on_isr_change_committed(self, registration: PartitionRegistration, now_ms: int) -> bool:
        """Our ISR change was written and `registration` is what the store now holds
        (Partition.handleAlterPartitionUpdate). Ignored unless a change is in flight, the leader epoch is
        ours and the partition epoch not older; a registration that moved the leadership away (a
        reassignment completing, Kafka's NEW_LEADER_ELECTED) leaves the change pending until the
        metadata makes us follow. Returns whether the high watermark advanced."""
        if not self.is_leader or not self.isr_state.in_flight:
            return False
        if registration.leader_epoch != self.leader_epoch or registration.partition_epoch < self.partition_epoch:
            return False
        if registration.leader != self.local_id:
            return False
        self.isr_state = CommittedIsr(frozenset(registration.isr))
        self.partition_epoch = registration.partition_epoch
        return self._maybe_increment_high_watermark(now_ms)

    def on_isr_change_failed(self, error: ErrorCode) -> IsrChangeRequest | None:
        """The ISR change was refused (Partition.handleAlterPartitionError). OPERATION_NOT_ATTEMPTED /
        INELIGIBLE_REPLICA: back to the committed ISR (the change was certainly not applied). A stale
        view (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION -- a lost compare-and-set --, unknown
        partition, INVALID_REQUEST, NEW_LEADER_ELECTED): stay pending until make_leader / make_follower
        brings the newer registration. Anything else: returns the same request to send again."""
        current = self.isr_state
        if isinstance(current, CommittedIsr):
            return None
        if error in _REVERT:
            self.isr_state = current.committed
            return None
        if error in _AWAIT_METADATA:
            return None
        return current.request

    # -- leader: the high watermark -------------------------------------------------------------

    def _maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """Partition.maybeIncrementLeaderHW: the smallest log end over the maximal ISR and the caught-up
        eligible followers outside it (so a follower about to join is not left behind), never lower than
        before; frozen while the committed ISR is below the effective min ISR (KIP-966)."""
        if not self.is_leader:
            return False
        if self.freeze_hwm_below_min_isr and self.is_under_min_isr:
            return False
        end = self.log.log_end_offset
        new = end
        maximal = self.isr_state.maximal
        for replica_id, state in self.followers.items():
            if state.log_end_offset >= new:
                continue
            if replica_id in maximal or (
                    state.is_caught_up(end, now_ms, self.replica_lag_time_max_ms)
                    and self.is_isr_eligible(replica_id, state.broker_epoch)):
                new = state.log_end_offset
        if new <= self.high_watermark:
            return False
        self.high_watermark = new
        self._complete_waiting()
        return True

    # -- follower -------------------------------------------------------------------------------

    def truncation_point(self, leader_answer: EpochEndOffset, fetch_offset: int | None = None) -> TruncationState:
        """Where to cut our log for the leader's DivergingEpoch or OffsetForLeaderEpoch answer about our
        latest epoch (kcoord.cluster.leader_epochs.truncation_point). `fetch_offset` is the offset the
        fetcher stands at (default: our high watermark, Kafka's starting point for a log without
        epochs). After cutting, call on_log_truncated; when the state is not `completed`, ask again with
        the new `last_fetched_epoch`."""
        log = self.log
        at = self.high_watermark if fetch_offset is None else fetch_offset
        return truncation_point(log.leader_epochs, log.log_end_offset, leader_answer, at)

    def on_log_truncated(self) -> None:
        """The log was cut: the high watermark is never above the log end (UnifiedLog.truncateTo)."""
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def on_fetch_response(self, leader_high_watermark: int) -> int:
        """A follower's fetch answered (after appending its records): our high watermark is the leader's,
        bounded by our log (UnifiedLog.updateHighWatermark: not below the log start, not above the log
        end; it may go down, e.g. to a new leader's lower one)."""
        log = self.log
        self.high_watermark = max(log.log_start_offset, min(leader_high_watermark, log.log_end_offset))
        return self.high_watermark


__all__ = [
    "NO_EPOCH",
    "CommittedIsr",
    "FetchDecision",
    "FollowerState",
    "IsrState",
    "LocalLog",
    "PartitionReplication",
    "PendingAck",
    "PendingExpandIsr",
    "PendingShrinkIsr",
    "Role",
]
