"""A partition's leader epochs: which epoch began at which offset (Kafka's LeaderEpochFileCache), kept in
the partition directory's `leader-epoch-checkpoint` (Kafka's format: version 0, count, "epoch offset"
lines), so OffsetForLeaderEpoch can tell a consumer where an epoch ended.

The log assigns an entry when it becomes leader at an epoch (become_leader), when it appends the first
batch of a new epoch as leader, and for every batch a follower appends (each carries its leader's epoch);
it cuts entries away when it is truncated (truncate_from_end) and when its start moves
(truncate_from_start), as Kafka's UnifiedLog does.

Durability as Kafka's (storage/.../epoch/LeaderEpochFileCache.java): `assign` rewrites the checkpoint
and fsyncs it before it returns (CheckpointFile.write: temporary file fsynced, atomic move, directory
fsynced), so the file never misses an entry; the truncations rewrite it without fsyncs (Kafka flushes
them in the background, truncateFromEndAsyncFlush / truncateFromStartAsyncFlush): a crash may bring
back stale entries, which the log cuts again when it loads the cache (as Kafka's LogLoader does).
"""
from __future__ import annotations

import bisect
import os
from collections.abc import Iterable

from kcoord.storage.checkpoint import read_checkpoint_lines, write_checkpoint_lines
from kcoord.storage.fs import FS

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, fs: FS, directory: str) -> None:
        self._fs = fs
        self._path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self.entries: list[tuple[int, int]] = []  # (epoch, start offset), both ascending
        lines = read_checkpoint_lines(fs, self._path)
        try:
            self.entries = [(int(e), int(o)) for e, _, o in (line.partition(" ") for line in lines or [])]
        except ValueError:
            lines = None
        # False: no usable file (a log from before epochs were kept, or one torn by a crash): rebuild.
        self.loaded = lines is not None

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def rebuild(self, batches: Iterable[tuple[int, int]]) -> None:
        """From (partition leader epoch, base offset) of every batch, for a log without a checkpoint."""
        self.entries = []
        for epoch, base_offset in batches:  # a log's epochs only grow: only the first batch of each counts
            if epoch >= 0 and (not self.entries or epoch > self.entries[-1][0]):
                self.entries.append((epoch, base_offset))
        self.loaded = True
        if self.entries:
            self._save()

    def assign(self, epoch: int, start_offset: int) -> bool:
        """`epoch` starts at `start_offset`, by Kafka's rule (LeaderEpochFileCache.assign, isUpdateNeeded,
        maybeTruncateNonMonotonicEntries): nothing changes when the latest entry is this epoch starting at
        or below that offset; otherwise every entry from the end that does not stay strictly below the new
        one -- an epoch at or above it, or a start at or above its start -- is removed (a conflicting
        history: the same epoch seen again from a lower offset, or an epoch begun where a later one had
        been recorded), and the new entry becomes the latest. The checkpoint is then rewritten and fsynced.
        True when the entries changed. ValueError for a negative epoch or offset (as Kafka)."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self.entries
        if entries:
            latest_epoch, latest_start = entries[-1]
            if epoch == latest_epoch and start_offset >= latest_start:
                return False
            while entries and (entries[-1][0] >= epoch or entries[-1][1] >= start_offset):
                entries.pop()
        entries.append((epoch, start_offset))
        self._save(durable=True)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut back to `end_offset`: epochs starting at or after it never happened."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: earlier epochs go; the one covering it starts there."""
        i = bisect.bisect_right([offset for _, offset in self.entries], start_offset)
        if i == 0:
            return
        covering = self.entries[i - 1]
        kept = [(covering[0], max(covering[1], start_offset))] + self.entries[i:]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's LeaderEpochFileCache.endOffsetFor: the latest epoch ends at the
        log end; an earlier one where the next known epoch starts, reported with the largest known epoch
        at or below it; an epoch older than every entry, where the first entry starts; an unknown newer
        epoch (or none at all) is undefined."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.entries[-1][0]:
            return requested_epoch, log_end_offset
        epochs = [epoch for epoch, _ in self.entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self.entries[0][1]
        return epochs[higher - 1], self.entries[higher][1]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at `offset` was written in (the latest entry starting at or below it);
        UNDEFINED_EPOCH before the first entry."""
        i = bisect.bisect_right([start for _, start in self.entries], offset)
        return self.entries[i - 1][0] if i else UNDEFINED_EPOCH

    def _save(self, durable: bool = False) -> None:
        # Not fsynced unless asked (assign asks, as Kafka's writeToFile): the log fsyncs its directory with
        # its next flush, and a torn file reads as malformed, which rebuilds the cache from the batches.
        write_checkpoint_lines(self._fs, self._path, [f"{epoch} {offset}" for epoch, offset in self.entries],
                               durable=durable)
