"""What a share fetch reads from a partition log: whole batches from an offset, below the high watermark
(share.isolation.level=read_committed: below the last stable offset), and the offset ranges that are
never to be delivered -- transaction markers always, and with read_committed the batches of aborted
transactions (found as a read_committed consumer finds them: a producer's batches from the first
offset of its aborted transaction up to its marker; kcoord.broker.data.txn_index).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kcoord.broker.data.visibility import high_watermark
from kcoord.protocol.records import iter_batches
from kcoord.storage import StorageError

READ_COMMITTED = 1


@dataclass(slots=True)
class ShareRead:
    records: bytes
    batches: list[tuple[int, int]]       # (base offset, last offset) of each batch in `records`
    not_delivered: list[tuple[int, int]]  # offset ranges to archive: markers, aborted transactions


EMPTY = ShareRead(b"", [], [])


def read(plog: Any, txn_index: Any, offset: int, max_bytes: int, isolation_level: int,
         hw: int | None = None) -> ShareRead:
    """`hw`: how far consumers may read (cluster mode: the ISR's high watermark); default this log's."""
    hw = high_watermark(plog) if hw is None else hw
    limit = min(txn_index.last_stable_offset(plog), hw) if isolation_level == READ_COMMITTED else hw
    if not plog.log_start_offset <= offset < limit:
        return EMPTY
    try:
        records = plog.read(offset, max(max_bytes, 1), max_offset=limit)
    except StorageError:  # retention moved the log start meanwhile: nothing to read there
        return EMPTY
    headers = [h for _pos, h, _b in iter_batches(records)]
    if not headers:
        return EMPTY
    aborted = []
    if isolation_level == READ_COMMITTED:
        aborted = sorted(txn_index.aborted_between(plog, headers[0].base_offset, headers[-1].next_offset),
                         key=lambda a: a[1])
    active: set[int] = set()
    skip: list[tuple[int, int]] = []
    for h in headers:
        while aborted and aborted[0][1] <= h.base_offset:
            active.add(aborted.pop(0)[0])
        if h.is_control:
            skip.append((h.base_offset, h.last_offset))
            active.discard(h.producer_id)
        elif h.is_transactional and h.producer_id in active:
            skip.append((h.base_offset, h.last_offset))
    return ShareRead(bytes(records), [(h.base_offset, h.last_offset) for h in headers], skip)


def trim(records: bytes, first: int, last: int) -> bytes:
    """The batches of `records` that hold offsets in [first, last] (what was acquired), in one slice."""
    start = end = None
    for pos, h, view in iter_batches(records):
        if h.last_offset >= first and h.base_offset <= last:
            if start is None:
                start = pos
            end = pos + len(view)
    return b"" if start is None else records[start:end]
