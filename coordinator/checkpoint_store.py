"""Where a partition's state comes from (checkpoint + log tail, or the whole log), and where its
checkpoint lives. Blocking I/O; the runtime's kcoord.coordinator.runtime.checkpoints decides when to call it.

The checkpoint sits in the partition's directory as `kcoord-group-state.checkpoint`: not a
`<digits>.log/.index/.snapshot` name that storage recovery or Kafka's tools would take for a
segment, and not a `.cleaned/.swap/.deleted` leftover that recovery removes. It is replaced
atomically (temporary file, fsync, rename, fsync of the directory), so a crash leaves the old
checkpoint or the new one, never a torn one.

`start_state` decides what a load replays: the checkpoint's state and the log from its offset,
when the checkpoint is valid for the log as it is now; otherwise (the reason is logged) an empty
state and the whole log. A rejected checkpoint is deleted at once: once the log grows past its
offset again, it would look valid. Valid means: intact (kcoord.coordinator.checkpoint), its offset
within [log start, log end] (beyond the end: the log was truncated below it), and younger than
half the partition's delete.retention.ms (see MAX_AGE_FRACTION).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Generator, Iterator
from typing import NamedTuple

from kcoord.coordinator import checkpoint
from kcoord.coordinator.gc_pause import gc_paused
from kcoord.coordinator.partition_state import PartitionState
from kcoord.protocol.control_records import COMMIT, marker_coordinator_epoch, marker_type
from kcoord.protocol.record_kv import batch_key_values, fold_key_values
from kcoord.protocol.records import iter_batches
from kcoord.storage.fs import read_file, replace_file

CHECKPOINT_FILE = "kcoord-group-state.checkpoint"
# Compaction may drop a tombstone delete.retention.ms after it was written. Tombstones written after
# a checkpoint's log read must still be in the log when it is loaded, so a checkpoint is trusted
# only while younger than a fraction of that: a record past its offset was appended at most moments
# before the read (it was not durable yet), far less than the margin this leaves.
MAX_AGE_FRACTION = 0.5
READ_CHUNK = 4 << 20

log = logging.getLogger("kcoord.coordinator.checkpoint")


def checkpoint_path(partition_log) -> str:
    return os.path.join(partition_log.directory, CHECKPOINT_FILE)


def start_state(partition_log, partition: int, now_ms: int,
                lazy: bool = False) -> tuple[PartitionState, int, int | None]:
    """(state, offset to replay from, when it was written) from a valid checkpoint, else (empty
    state, log start offset, None). `lazy`: see checkpoint.decode."""
    path = checkpoint_path(partition_log)
    try:
        data = read_file(partition_log.fs, path)
    except OSError as exc:
        return _reject(partition_log, path, f"unreadable: {exc}")
    if data is None:
        return PartitionState(), partition_log.log_start_offset, None
    try:
        offset, written_ms, state = checkpoint.decode(data, partition, lazy)
    except checkpoint.CheckpointError as exc:
        return _reject(partition_log, path, str(exc))
    age_ms, max_age_ms = now_ms - written_ms, partition_log.config.delete_retention_ms * MAX_AGE_FRACTION
    if not -60_000 <= age_ms <= max_age_ms:
        return _reject(partition_log, path, f"written {age_ms} ms ago; trusted up to {max_age_ms:.0f} ms "
                                            "(half of delete.retention.ms), and not from the future")
    start, end = partition_log.log_start_offset, partition_log.log_end_offset
    if offset > end:
        return _reject(partition_log, path, f"covers up to offset {offset}, beyond the log end {end} (truncated log)")
    if offset < start:
        return _reject(partition_log, path, f"covers up to offset {offset}, below the log start {start}")
    return state, offset, written_ms


class Loaded(NamedTuple):
    state: PartitionState | None  # the replay of the log up to `end`, when kept (no checkpoint used)
    start: int             # where the replay began: the checkpoint's offset, or the log start
    end: int
    replayed: int          # records replayed from the log
    written_ms: int | None  # when the checkpoint used was written; None: no checkpoint used


def load(partition_log, partition: int, now_ms: int, load_partition, use_checkpoint: bool = True) -> Loaded:
    """Load one partition: `load_partition(partition, tail records, start state, keep_state)` gets
    the checkpoint's state and the log after it, or an empty state and the whole log (also when
    use_checkpoint is False: benches and tests compare the two). Without a checkpoint, the state
    is kept (Loaded.state) to be written as one; else it is handed over to the groups (None)."""
    with gc_paused():
        return finish(load_steps(partition_log, partition, now_ms, load_partition, use_checkpoint))


def load_steps(partition_log, partition: int, now_ms: int, load_partition,
               use_checkpoint: bool = True) -> Generator[None, None, Loaded]:
    """`load`, a step at a time: it yields after each READ_CHUNK of the log it folded into the state (so
    a caller on an event loop serves requests in between) and returns the Loaded; the state is handed to
    `load_partition` with the tail already replayed into it (no records)."""
    if use_checkpoint:
        state, start, written_ms = start_state(partition_log, partition, now_ms)
    else:
        state, start, written_ms = PartitionState(), partition_log.log_start_offset, None
    records: list = []
    replayed = 0
    end = start
    take = lambda batch, header, offset: records.extend(batch_key_values(batch, header, offset))  # noqa: E731
    for reached in _read_chunks(partition_log, start, None, take, state.transactional, records.extend,
                                state.marker_epochs):
        end = reached
        state.replay(records, log)
        replayed += len(records)
        records.clear()
        yield
    keep = written_ms is None and replayed > 0
    load_partition(partition, (), state, keep)
    return Loaded(state if keep else None, start, max(end, start), replayed, written_ms)


def finish(steps: Generator[None, None, Loaded]) -> Loaded:
    """Run `load_steps` to the end at once."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def refreshed_state(partition_log, partition: int, now_ms: int, logger) -> tuple[PartitionState, int]:
    """(state, offset) for a new checkpoint: the current one's state (its groups left undecoded
    unless the tail touches them) with the durable log after it replayed. CheckpointError if a
    group of the checkpoint turns out undecodable."""
    with gc_paused():
        state, start, _ = start_state(partition_log, partition, now_ms, lazy=True)
        latest, offset = read_tail_latest(partition_log, start, partition_log.recovery_point)
        state.replay_latest(latest, logger)
        del latest  # freed while collections wait (see read_tail_latest)
    return state, offset


def _reject(partition_log, path: str, reason: str) -> tuple[PartitionState, int, None]:
    log.warning("%s: ignoring checkpoint %s (%s); replaying the whole log", partition_log.name, path, reason)
    remove(partition_log)
    return PartitionState(), partition_log.log_start_offset, None


def remove(partition_log) -> None:
    partition_log.fs.remove(checkpoint_path(partition_log))


def read_tail(partition_log, from_offset: int, up_to: int | None = None,
              open_transactions: dict | None = None) -> tuple[list, int]:
    """(key, value) of every record in [from_offset, up_to) (up_to: default the log end, else a
    batch boundary such as the recovery point), and the offset just past the last batch read (or where
    the first transaction still open begins: see `_read`). `open_transactions` gets the records of
    those, by producer id."""
    records: list = []
    offset = _read(partition_log, from_offset, up_to,
                   lambda batch, header, offset: records.extend(batch_key_values(batch, header, offset)),
                   open_transactions, records.extend)
    return records, offset


def read_tail_latest(partition_log, from_offset: int, up_to: int | None = None) -> tuple[dict, int]:
    """`read_tail` folded as it is read into the last value per key (what `PartitionState.replay_latest`
    takes): no (key, value) pair per record, only one dict entry per key. Call it with collections
    paused and free the dict before they resume: a collection would walk its entries for nothing."""
    latest: dict = {}
    offset = _read(partition_log, from_offset, up_to,
                   lambda batch, header, offset: fold_key_values(latest, batch, header, offset), None, latest.update)
    return latest, offset


def _read(partition_log, from_offset: int, up_to: int | None, take, open_transactions: dict | None = None,
          take_records=None) -> int:
    """`take(batch, header, offset)` for each data batch holding offsets in [from_offset, up_to), in order;
    returns the offset just past the last batch read (or where the first transaction still open begins,
    see `_read_chunks`)."""
    offset = from_offset
    for reached in _read_chunks(partition_log, from_offset, up_to, take, open_transactions, take_records):
        offset = reached
    return offset


def _read_chunks(partition_log, from_offset: int, up_to: int | None, take,
                 open_transactions: dict | None = None, take_records=None,
                 marker_epochs: dict | None = None) -> Iterator[int]:
    """`_read`, yielding the offset reached after each READ_CHUNK bytes read.

    Transactional batches (TxnOffsetCommit's) are held back until their producer's marker: their records
    go to `take_records` at the marker if it commits, and are dropped if it aborts (what Kafka's replay of
    the marker does); a tombstone meanwhile drops its key from them (as Kafka's replay of a tombstone drops
    pending offsets). Those with no marker yet go to `open_transactions` (producer id -> records), and the
    last offset yielded is then where the first of them begins, so a checkpoint never covers an open
    transaction: the next read from there sees it whole. `marker_epochs` gets each producer's highest
    marker coordinator epoch read."""
    end = partition_log.log_end_offset if up_to is None else min(up_to, partition_log.log_end_offset)
    offset = from_offset
    held = _OpenTransactions()
    while offset < end:
        data = partition_log.read(offset, READ_CHUNK, max_offset=end)
        progressed = False
        for _position, header, batch in iter_batches(data):
            if header.last_offset < offset:
                continue
            if header.base_offset >= end:
                break
            if header.is_transactional:
                committed = held.add(batch, header, offset, marker_epochs)
                if committed:
                    take_records(committed)
            elif not header.is_control:
                if held:
                    held.plain(batch, header, offset)
                take(batch, header, offset)
            offset = header.next_offset
            progressed = True
        if not progressed:
            break
        yield offset
    if held:
        if open_transactions is not None:
            open_transactions.update(held.records)
        yield max(from_offset, min(held.first_offset.values()))


class _OpenTransactions:
    """The records of transactions whose marker is not read yet, by producer id."""

    __slots__ = ("records", "first_offset")

    def __init__(self) -> None:
        self.records: dict[int, list] = {}
        self.first_offset: dict[int, int] = {}

    def __bool__(self) -> bool:
        return bool(self.records)

    def add(self, batch, header, offset: int, marker_epochs: dict | None = None) -> list | None:
        """A transactional batch: data is held; a marker ends its producer's transaction and returns the
        records to apply (COMMIT) or None (its coordinator epoch into `marker_epochs`)."""
        pid = header.producer_id
        kvs = batch_key_values(batch, header, offset)
        if not header.is_control:
            self.records.setdefault(pid, []).extend(kvs)
            self.first_offset.setdefault(pid, header.base_offset)
            return None
        records = self.records.pop(pid, None)
        self.first_offset.pop(pid, None)
        if marker_epochs is not None and kvs:
            marker_epochs[pid] = max(marker_epochs.get(pid, -1), marker_coordinator_epoch(kvs[0][1]))
        return records if kvs and marker_type(kvs[0][0]) == COMMIT else None

    def plain(self, batch, header, offset: int) -> None:
        """A non-transactional batch read while transactions are open: its tombstones drop those keys."""
        gone = {key for key, value in batch_key_values(batch, header, offset) if value is None}
        if gone:
            for pid, kvs in self.records.items():
                self.records[pid] = [kv for kv in kvs if kv[0] not in gone]


def write(partition_log, partition: int, state: PartitionState, offset: int, written_ms: int) -> int:
    """Replace the partition's checkpoint with `state` as of `offset`, the log having been read at
    `written_ms`; returns its size."""
    data = checkpoint.encode(state, partition, offset, written_ms)
    replace_file(partition_log.fs, checkpoint_path(partition_log), data)
    return len(data)
