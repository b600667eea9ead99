"""Log compaction (cleanup.policy=compact): keep the latest record per key, drop tombstones once
their delete horizon has passed.

`prepare` is the heavy, read-only part and runs in a worker thread: it reads the cleanable
(durable, non-active) segments, and writes each one that changes to `<segment>.log.cleaned`,
fsynced. The log's owner then renames each `.cleaned` over its `.log` — an atomic swap — so a
crash at any point leaves either the old or the new segment, and recovery deletes any leftover
`.cleaned` file. Segments are cleaned one to one (same base offset, same name).

Transactions (as Kafka's LogCleaner): records of aborted transactions are removed and never count as a
key's latest value; a transaction whose marker is not in the cleaned segments yet is left as it is and
does not count either; markers stay. A committed transaction's records count from its COMMIT marker on,
less the keys a tombstone deleted in between, which is how kcoord's group coordinator applies
transactional offsets (live and on load), so compaction never changes what a load gives. (Kafka orders them by their own offsets instead; the two differ only
for a key written outside the transaction between its records and its marker.)

Tombstones follow KIP-534: the first clean that keeps a tombstone stamps its batch with a delete
horizon (now + delete.retention.ms, in the base timestamp, attribute bit 6); a later clean after
the horizon drops it. Cleaned batches keep their base offset and last offset delta, so offsets
never move, only gaps appear.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from kcoord.protocol.control_records import COMMIT, marker_type
from kcoord.protocol.records import BatchHeader, Record, build_batch, iter_record_tuples, parse_batch_header
from kcoord.storage.fs import FS
from kcoord.storage.segment import CLEANED_SUFFIX, SegmentState

if TYPE_CHECKING:
    from kcoord.storage.segment import LogSegment

_WRITE_CHUNK = 1 << 20


@dataclasses.dataclass(slots=True)
class CleanPlan:
    fs: FS
    segments: list[LogSegment]
    now_ms: int
    delete_retention_ms: int
    generation: int = 0   # the log's generation when planned: a truncation since voids the clean


@dataclasses.dataclass(slots=True)
class CleanedSegment:
    segment: LogSegment
    path: str             # the `.cleaned` file
    size: int             # bytes after cleaning
    bytes_before: int
    records_removed: int
    state: SegmentState   # offsets, timestamps and indexes of the cleaned copy


@dataclasses.dataclass(slots=True)
class CleanStats:
    segments: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0

    def add(self, result: CleanedSegment) -> None:
        self.segments += 1
        self.bytes_before += result.bytes_before
        self.bytes_after += result.size
        self.records_removed += result.records_removed


@dataclasses.dataclass(slots=True)
class OffsetMap:
    latest: dict[bytes, int]           # key -> offset of its latest record
    last_producer_batch: dict[int, int]  # producer id -> base offset of its last batch
    aborted: set[int] = dataclasses.field(default_factory=set)    # base offsets of aborted transactions' batches
    undecided: set[int] = dataclasses.field(default_factory=set)  # ... of transactions with no marker here


def build_offset_map(segments: list[LogSegment]) -> OffsetMap:
    """What the cleaner must know about the segments it cleans: latest offset per key, each idempotent
    producer's last batch, and which transactional batches were aborted or are not decided yet."""
    latest: dict[bytes, int] = {}
    last_producer_batch: dict[int, int] = {}
    open_txns: dict[int, list[tuple[int, list[tuple[int, bytes]]]]] = {}  # producer id -> its batches' keys
    aborted: set[int] = set()
    for segment in segments:
        for _, header, batch in segment.scan():
            if header.producer_id >= 0:
                last_producer_batch[header.producer_id] = header.base_offset
            if header.is_control:
                if header.is_transactional:
                    batches = open_txns.pop(header.producer_id, [])
                    if _is_commit(batch, header):
                        for _base, keys in batches:
                            latest.update((key, offset) for offset, key in keys)
                    else:
                        aborted.update(base for base, _keys in batches)
                continue
            records = [(offset, key, value) for offset, _ts, key, value, _headers in iter_record_tuples(batch, header)
                       if key is not None]
            keys = [(offset, key) for offset, key, _value in records]
            if header.is_transactional:
                open_txns.setdefault(header.producer_id, []).append((header.base_offset, keys))
                continue
            if open_txns:  # a tombstone drops the key from the open transactions (as their loader does)
                gone = {key for _offset, key, value in records if value is None}
                if gone:
                    for batches in open_txns.values():
                        for i, (base, txn_keys) in enumerate(batches):
                            batches[i] = (base, [(o, k) for o, k in txn_keys if k not in gone])
            latest.update((key, offset) for offset, key in keys)
    undecided = {base for batches in open_txns.values() for base, _keys in batches}
    return OffsetMap(latest, last_producer_batch, aborted, undecided)


def _is_commit(batch, header: BatchHeader) -> bool:
    for _offset, _ts, key, _value, _headers in iter_record_tuples(batch, header):
        return marker_type(key) == COMMIT
    return False


def filter_batch(header: BatchHeader, batch, offsets: OffsetMap, now_ms: int,
                 delete_retention_ms: int) -> tuple[bytes | None, int, bool]:
    """(the batch as it should be after cleaning or None to drop it, records removed, changed?)"""
    if header.is_control or header.base_offset in offsets.undecided:
        return bytes(batch), 0, False
    if header.base_offset in offsets.aborted:
        return None, header.records_count, True
    latest = offsets.latest
    records = list(iter_record_tuples(batch, header))
    horizon = header.delete_horizon_ms
    kept = []
    tombstones_kept = 0
    for record in records:
        offset, _ts, key, value, _headers = record
        if key is not None and latest.get(key, offset) != offset:
            continue  # a later record has this key
        if value is None and key is not None:
            if horizon is not None and now_ms >= horizon:
                continue  # tombstone past its delete horizon
            tombstones_kept += 1
        kept.append(record)
    if not kept:
        if header.producer_id < 0 or offsets.last_producer_batch.get(header.producer_id) != header.base_offset:
            return None, len(records), True
        # As Kafka: an idempotent producer's last batch stays, emptied, so its sequence and epoch
        # (which the broker rebuilds producer state from) outlive the records.
        if header.records_count == 0:
            return bytes(batch), 0, False
        return _rebuild(header, [], None), len(records), True
    if len(kept) == len(records) and (tombstones_kept == 0 or horizon is not None):
        return bytes(batch), 0, False
    new_horizon = None
    if tombstones_kept:
        new_horizon = horizon if horizon is not None else now_ms + delete_retention_ms
    return _rebuild(header, kept, new_horizon), len(records) - len(kept), True


def _rebuild(header: BatchHeader, kept: list[tuple], delete_horizon_ms: int | None) -> bytes:
    """The batch with only `kept` records; same offsets span, producer fields and compression."""
    return build_batch(
        [Record._make(r) for r in kept], base_offset=header.base_offset, compression=header.compression,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, transactional=header.is_transactional,
        timestamp_type=header.timestamp_type, partition_leader_epoch=header.partition_leader_epoch,
        last_offset_delta=header.last_offset_delta, delete_horizon_ms=delete_horizon_ms)


def clean_segment(plan: CleanPlan, segment: LogSegment, offsets: OffsetMap) -> CleanedSegment | None:
    """Write the cleaned copy of `segment` to `.cleaned` and fsync it; None if nothing changes."""
    fs = plan.fs
    path = segment.log_path + CLEANED_SUFFIX
    fd = fs.open(path)
    try:
        fs.truncate(fd, 0)
        state, removed, changed = _write_cleaned(plan, segment, offsets, fd)
        if changed:
            fs.fsync(fd)
    except BaseException:
        fs.close(fd)
        fs.remove(path)
        raise
    fs.close(fd)
    if not changed:
        fs.remove(path)
        return None
    return CleanedSegment(segment, path, state.size, segment.size, removed, state)


def _write_cleaned(plan: CleanPlan, segment: LogSegment, offsets: OffsetMap,
                   fd: int) -> tuple[SegmentState, int, bool]:
    """Filter every batch of `segment` into fd, in chunks; (state of the copy, records removed, changed?)."""
    state = SegmentState(segment.base_offset, segment.index_interval_bytes)
    position = removed = 0
    changed = False
    pending: list[bytes] = []
    pending_size = 0
    for _, header, batch in segment.scan():
        cleaned, dropped, batch_changed = filter_batch(header, batch, offsets, plan.now_ms, plan.delete_retention_ms)
        removed += dropped
        changed = changed or batch_changed
        if cleaned is not None:
            state.track(header if not batch_changed else parse_batch_header(cleaned), position + pending_size)
            pending.append(cleaned)
            pending_size += len(cleaned)
        if pending_size >= _WRITE_CHUNK:
            plan.fs.write_all(fd, b"".join(pending), position)
            position += pending_size
            pending, pending_size = [], 0
    if changed and pending:
        plan.fs.write_all(fd, b"".join(pending), position)
    return state, removed, changed


def prepare(plan: CleanPlan) -> list[CleanedSegment]:
    """Worker-thread half of a clean: build the offset map, write every changed segment's copy."""
    offsets = build_offset_map(plan.segments)
    results = []
    for segment in plan.segments:
        result = clean_segment(plan, segment, offsets)
        if result is not None:
            results.append(result)
    return results
