"""KIP-932's `__share_group_state` records (ShareSnapshot, key type 0; ShareUpdate, key type 1), decoded one
record at a time, and what replaying a share-partition's records says about its deliveries.

Layouts are those of Kafka 4's share-coordinator message definitions: the key (non-flexible) is GroupId,
TopicId, Partition; the value (version 0, flexible) is SnapshotEpoch, [StateEpoch], LeaderEpoch,
StartOffset, [CreateTimestamp, WriteTimestamp] (snapshot only), StateBatches [FirstOffset, LastOffset,
DeliveryState, DeliveryCount], then tagged fields (tag 0: Kafka 4.2's DeliveryCompleteCount). A null value
is a deleted share-partition (DeleteShareGroupState).

What the records show (`replay`): a share-partition's state is written when records settle or come back,
never when they are acquired, and a record settled at the start of the window is not written at all:
the start offset moves past it. So an offset the start offset passes (after the share-partition was
initialized) was delivered once more than its last written AVAILABLE delivery count (once if never
written). Per share-partition: `deliveries`, `redeliveries` (deliveries past the first), `completed`
(offsets acknowledged or archived, written or passed by the start offset), `rejections` (offsets written
ARCHIVED: rejected, or past group.share.delivery.count.limit; one settled at the window's start is not
written, so this is a lower bound), `releases_or_lock_expiries` (writes putting a delivered offset back to
AVAILABLE: a RELEASE, a closed session, or an acquisition lock running out -- the records alone cannot
tell these apart). A start offset moved by retention counts as completions too.
"""
import uuid
from collections.abc import Iterable

import pyarrow as pa

from kcoord.analytics.group_metadata import Cursor, Truncated

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT, UPDATE = 0, 1
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4

STATE_BATCHES = pa.list_(pa.struct([("first_offset", pa.int64()), ("last_offset", pa.int64()),
                                    ("delivery_state", pa.int8()), ("delivery_count", pa.int16())]))
SCHEMA = pa.schema([
    ("log_partition", pa.int32()), ("log_offset", pa.int64()), ("timestamp", pa.int64()),
    ("group", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32()), ("record_type", pa.int16()),
    ("tombstone", pa.bool_()), ("snapshot_epoch", pa.int32()), ("leader_epoch", pa.int32()),
    ("start_offset", pa.int64()), ("state_batches", STATE_BATCHES),
])
FIELDS = SCHEMA.names
STATS_SCHEMA = pa.schema([
    ("group", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32()), ("records", pa.int64()),
    ("start_offset", pa.int64()), ("deliveries", pa.int64()), ("redeliveries", pa.int64()),
    ("completed", pa.int64()), ("rejections", pa.int64()), ("releases_or_lock_expiries", pa.int64()),
    ("first_timestamp", pa.int64()), ("last_timestamp", pa.int64()),
])


def record_type(key) -> int | None:
    if len(key) < 2:
        return None
    t = int.from_bytes(key[:2], "big", signed=True)
    return t if t in (SNAPSHOT, UPDATE) else None


def decode(key, value) -> dict:
    """One record as a dict of SCHEMA's fields (position fields excluded); Truncated / ValueError if malformed."""
    t = record_type(key)
    if t is None:
        raise ValueError("not a share-state record key")
    k = Cursor(key, 2)
    out = {"record_type": t, "group": k.string(), "topic_id": str(uuid.UUID(bytes=k.raw(16))),
           "partition": k.int32(), "tombstone": value is None, "snapshot_epoch": None, "leader_epoch": None,
           "start_offset": None, "state_batches": None}
    if value is None:
        return out
    c = Cursor(value, 0, flexible=True)
    version = c.int16()
    if version != 0:
        raise ValueError(f"unknown value version {version} of share-state record type {t}")
    out["snapshot_epoch"] = c.int32()
    if t == SNAPSHOT:
        c.int32()  # StateEpoch
    out["leader_epoch"], out["start_offset"] = c.int32(), c.int64()
    if t == SNAPSHOT:
        c.int64(), c.int64()  # CreateTimestamp, WriteTimestamp

    def batch():
        first, last = c.int64(), c.int64()
        state, count = c.raw(1)[0], c.int16()
        c.tagged_fields()
        return (first, last, state, count)
    out["state_batches"] = c.array(batch) or []
    c.tagged_fields()
    return out


def row(key, value, position: tuple) -> tuple | None:
    """A SCHEMA tuple (position: log_partition, log_offset, timestamp); None if malformed."""
    try:
        d = decode(key, value)
    except (Truncated, UnicodeDecodeError, ValueError, IndexError):
        return None
    return position + tuple(d[f] for f in FIELDS[3:])


def to_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True))
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, SCHEMA, strict=True)],
                                      schema=SCHEMA)


# ---------------------------------------------------------------- replay (pure)

def replay(records: Iterable[dict]) -> dict:
    """The delivery counts of one share-partition's records, in log order (dicts with SCHEMA's fields;
    a state batch as a (first, last, state, count) tuple or a dict). A tombstone starts it over."""
    counts: dict[int, int] = {}     # offset -> delivery count as last written
    states: dict[int, int] = {}     # offset -> delivery state as last written
    stats = {"records": 0, "start_offset": None, "releases_or_lock_expiries": 0,
             "first_timestamp": None, "last_timestamp": None}
    for rec in records:
        stats["records"] += 1
        ts = rec.get("timestamp")
        stats["first_timestamp"] = ts if stats["first_timestamp"] is None else stats["first_timestamp"]
        stats["last_timestamp"] = ts
        if rec["tombstone"]:
            counts, states = {}, {}
            stats["start_offset"] = None
            continue
        start = rec["start_offset"]
        initializing = rec.get("record_type") == SNAPSHOT and not rec["state_batches"] and not rec.get("snapshot_epoch")
        if start is not None and start >= 0:
            if stats["start_offset"] is not None and not initializing:
                _settle_below(stats["start_offset"], start, states, counts)
            stats["start_offset"] = start
        for b in rec["state_batches"] or ():
            first, last, state, count = (b["first_offset"], b["last_offset"], b["delivery_state"],
                                         b["delivery_count"]) if isinstance(b, dict) else b
            for offset in range(first, last + 1):
                if state == AVAILABLE and count > 0 and (states.get(offset) != AVAILABLE
                                                         or counts.get(offset, 0) != count):
                    stats["releases_or_lock_expiries"] += 1
                states[offset], counts[offset] = state, max(count, counts.get(offset, 0))
    stats.update(deliveries=sum(counts.values()), redeliveries=sum(max(n - 1, 0) for n in counts.values()),
                 completed=sum(1 for s in states.values() if s in (ACKNOWLEDGED, ARCHIVED)),
                 rejections=sum(1 for s in states.values() if s == ARCHIVED))
    return stats


def _settle_below(old_start: int, new_start: int, states: dict[int, int], counts: dict[int, int]) -> None:
    """The start offset moved from old_start to new_start: what was not settled there was, at its last
    delivery (ACKNOWLEDGED here: an archive at the window's start is not written either)."""
    for offset in range(old_start, new_start):
        if states.get(offset) in (ACKNOWLEDGED, ARCHIVED):
            continue
        counts[offset] = counts.get(offset, 0) + 1 if offset in counts else 1
        states[offset] = ACKNOWLEDGED


def replay_table(table: pa.Table) -> pa.Table:
    """applyInArrow: one share-partition's records (any order) -> one STATS_SCHEMA row."""
    rows = sorted(table.to_pylist(), key=lambda r: (r["log_partition"], r["log_offset"]))
    if not rows:
        return STATS_SCHEMA.empty_table()
    stats = replay(rows)
    head = rows[0]
    out = {"group": head["group"], "topic_id": head["topic_id"], "partition": head["partition"], **stats}
    return pa.Table.from_pylist([out], schema=STATS_SCHEMA)
