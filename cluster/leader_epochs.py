"""What replication computes from a partition's leader epochs, as pure functions.

The epochs themselves -- which epoch began at which offset, `assign`, `truncate_from_end` /
`truncate_from_start`, `end_offset_for` (Kafka's LeaderEpochFileCache.endOffsetFor) and the
`leader-epoch-checkpoint` file in Kafka's text format -- are kept by the log:
kcoord.storage.leader_epochs.LeaderEpochCache. Nothing of that is repeated here; this module only asks
it (through `EpochHistory`, which that class satisfies) the questions of Kafka's replication:

- the leader, given a follower's Fetch with a last fetched epoch: does the follower's log diverge from
  ours, and where does the epoch it names end here? (Partition.readRecords -> DivergingEpoch)
- the leader, given OffsetForLeaderEpoch (Partition.lastOffsetForLeaderEpoch through
  UnifiedLog.endOffsetForEpoch);
- the follower, given the leader's answer (a DivergingEpoch in a Fetch response, or an
  OffsetForLeaderEpoch response): where to cut its own log, and whether that cut is final
  (AbstractFetcherThread.getOffsetTruncationState, KIP-101 and KIP-279).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kcoord.protocol.errors import ErrorCode
from kcoord.storage.leader_epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEndOffset",
    "EpochHistory",
    "TruncationState",
    "check_last_fetched_epoch",
    "local_end_offset_for_epoch",
    "truncation_point",
]


class EpochHistory(Protocol):
    """The part of a log's leader-epoch cache replication reads (kcoord.storage.leader_epochs)."""

    @property
    def latest_epoch(self) -> int | None: ...

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]: ...


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """An epoch and the offset where it ends: FetchResponse's DivergingEpoch, OffsetForLeaderEpoch's
    answer. UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET when the log cannot tell."""

    epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_EPOCH_OFFSET


UNDEFINED = EpochEndOffset()


def local_end_offset_for_epoch(history: EpochHistory, epoch: int, log_end_offset: int) -> EpochEndOffset | None:
    """UnifiedLog.endOffsetForEpoch: the cache's answer, or None when it has no end offset for `epoch`
    (no epochs at all, an epoch newer than every known one, or UNDEFINED_EPOCH asked)."""
    found_epoch, found_offset = history.end_offset_for(epoch, log_end_offset)
    if found_offset == UNDEFINED_EPOCH_OFFSET:
        return None
    return EpochEndOffset(found_epoch, found_offset)


def check_last_fetched_epoch(
    history: EpochHistory,
    log_start_offset: int,
    log_end_offset: int,
    last_fetched_epoch: int,
    fetch_offset: int,
) -> tuple[ErrorCode, EpochEndOffset | None]:
    """The leader's check of a Fetch that names the epoch of the follower's last batch (Fetch v12+,
    KIP-595), as Partition.readRecords makes it, in its order:

    - the epoch has no end offset here (newer than every epoch we know, or no epochs at all):
      OFFSET_OUT_OF_RANGE;
    - a fetch offset below our log start: OFFSET_OUT_OF_RANGE, diverging or not;
    - our end offset for that epoch is below the fetch offset, or the epoch we know at or below it is
      older than it: the follower wrote what we never did -> DivergingEpoch {our epoch, its end offset},
      and nothing is read (the follower truncates to it and fetches again);
    - else (NONE, None): read on.
    `last_fetched_epoch` UNDEFINED_EPOCH (-1, an older Fetch or an empty follower log) skips the check."""
    if last_fetched_epoch == UNDEFINED_EPOCH:
        return ErrorCode.NONE, None
    ours = local_end_offset_for_epoch(history, last_fetched_epoch, log_end_offset)
    if ours is None or ours.epoch == UNDEFINED_EPOCH:
        return ErrorCode.OFFSET_OUT_OF_RANGE, None
    if fetch_offset < log_start_offset:
        return ErrorCode.OFFSET_OUT_OF_RANGE, None
    if ours.epoch < last_fetched_epoch or ours.end_offset < fetch_offset:
        return ErrorCode.NONE, ours
    return ErrorCode.NONE, None


@dataclass(frozen=True, slots=True)
class TruncationState:
    """Where the follower cuts its log, and whether it may then fetch (`completed`) or must first ask the
    leader again with its new latest epoch (AbstractFetcherThread's OffsetTruncationState)."""

    offset: int
    completed: bool


def truncation_point(
    history: EpochHistory,
    log_end_offset: int,
    leader_answer: EpochEndOffset,
    fetch_offset: int,
) -> TruncationState:
    """The follower's cut for the leader's answer about its latest epoch
    (AbstractFetcherThread.getOffsetTruncationState), never above its own log end:

    - the leader has no end offset for it (it predates the leader's first epoch, or the leader keeps no
      epochs): the current fetch offset (`fetch_offset`: Kafka's partition fetch offset, the high
      watermark for a replica without epochs), final;
    - an end offset without an epoch (OffsetForLeaderEpoch v0): that offset, final;
    - an epoch the follower has too: min(the leader's end offset, the follower's end of that epoch),
      final -- KIP-279's rule: both logs agree up to there;
    - an epoch the follower never had (its cache skips from an older epoch to a newer one): the end of
      the follower's largest epoch below it, not final: ask again with the epoch that is latest after
      this cut (KIP-279's "step back");
    - the follower's cache has no end for it (it keeps no epochs, e.g. a log from before epochs were
      kept): the leader's end offset, final (KIP-101's rule, before KIP-279).
    An epoch older than every epoch the follower knows is answered by its cache with the start of its
    first epoch (LeaderEpochFileCache.endOffsetFor), so it counts as "an epoch the follower has"."""
    if leader_answer.end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationState(min(fetch_offset, log_end_offset), True)
    if leader_answer.epoch == UNDEFINED_EPOCH:
        return TruncationState(min(leader_answer.end_offset, log_end_offset), True)
    ours = local_end_offset_for_epoch(history, leader_answer.epoch, log_end_offset)
    if ours is None:
        return TruncationState(min(leader_answer.end_offset, log_end_offset), True)
    if ours.epoch != leader_answer.epoch:
        return TruncationState(min(ours.end_offset, log_end_offset), False)
    return TruncationState(min(ours.end_offset, leader_answer.end_offset, log_end_offset), True)
