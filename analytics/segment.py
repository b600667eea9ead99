"""Decoding one `__consumer_offsets` segment (or any topic's segment, header-only) into Arrow.

This is the unit of work of one Spark partition, and also what the single-process baseline runs.
"""
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from kcoord.analytics import batches, consumer_records, frames, group_metadata, offsets, share_records, vector
from kcoord.analytics.batches import CONTROL, TIMESTAMP_LOG_APPEND, TRANSACTIONAL
from kcoord.analytics.transactions import COMMIT, visible_batches

CHUNK_RECORDS = 32_768    # records per vectorised pass: small enough that its arrays stay in cache

ASSIGNMENT = pa.list_(pa.struct([("topic", pa.string()), ("partition", pa.int32())]))
# A classic member's fields, then a consumer-protocol (KIP-848) member's (null for classic members):
# `assignment` is then its target at the epoch, `current_assignment` what it owned when the epoch ended.
MEMBER = pa.struct([
    ("member_id", pa.string()), ("group_instance_id", pa.string()), ("client_id", pa.string()),
    ("client_host", pa.string()), ("rebalance_timeout_ms", pa.int32()), ("session_timeout_ms", pa.int32()),
    ("subscribed_topics", pa.list_(pa.string())), ("assignment", ASSIGNMENT),
    ("subscribed_topic_regex", pa.string()), ("server_assignor", pa.string()), ("member_epoch", pa.int32()),
    ("current_assignment", ASSIGNMENT), ("pending_revocation", ASSIGNMENT),
])
CLASSIC_ONLY = (None,) * 5
GROUPS_SCHEMA = pa.schema([
    ("log_partition", pa.int32()), ("log_offset", pa.int64()), ("timestamp", pa.int64()),
    ("group", pa.string()), ("tombstone", pa.bool_()), ("value_version", pa.int16()),
    ("protocol_type", pa.string()), ("generation", pa.int32()), ("protocol", pa.string()),
    ("leader", pa.string()), ("state_timestamp", pa.int64()), ("members", pa.list_(MEMBER)),
    ("headers", pa.map_(pa.string(), pa.string())),   # all record headers (kcoord.rebalance.*)
])

BATCH_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("base_offset", pa.int64()),
    ("last_offset", pa.int64()), ("record_count", pa.int32()), ("base_timestamp", pa.int64()),
    ("max_timestamp", pa.int64()), ("producer_id", pa.int64()), ("transactional", pa.bool_()),
    ("control", pa.bool_()), ("compression", pa.int8()), ("size_bytes", pa.int32()),
])


def read_file(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def control_marker(buf, scan, i) -> int | None:
    """ABORT/COMMIT of control batch i (its first record's key: int16 version, int16 type)."""
    arena = frames.build_arena(buf, scan, [i])
    starts, _ = frames.record_starts(arena, [int(scan["count"][i])])
    if not len(starts):
        return None
    f = frames.parse_frames(arena.array, starts[:1])
    if not f.ok[0] or f.key_len[0] < 4:
        return None
    return int(vector.be_int(arena.array, f.key_pos[:1] + 2, 2)[0])


def lookahead_markers(paths, wanted, verify_crc=True) -> dict[int, bool]:
    """The first marker of each wanted producer id in the later segments `paths` (log order)."""
    wanted, found = set(wanted), {}
    for path in paths:
        buf = read_file(path)
        scan = batches.scan(buf, verify_crc)
        for i in np.flatnonzero(scan["attributes"] & CONTROL).tolist():
            pid = int(scan["producer_id"][i])
            if pid in wanted and pid not in found:
                found[pid] = control_marker(buf, scan, i) == COMMIT
        if len(found) == len(wanted):
            break
    return found


class SegmentDecoder:
    """Decodes the records of one `__consumer_offsets-N` segment, transactions resolved."""

    def __init__(self, buf, log_partition, later_paths=(), verify_crc=True, chunk_records=CHUNK_RECORDS):
        self.buf, self.log_partition = buf, log_partition
        self.scan = batches.scan(buf, verify_crc)
        self.visible = visible_batches(
            self.scan, lambda i: control_marker(buf, self.scan, i),
            lambda pids: lookahead_markers(later_paths, pids, verify_crc))
        self.chunk_records = chunk_records
        self.skipped_records = 0           # malformed or of an unknown record type

    def _chunks(self):
        rows = np.flatnonzero(self.visible)
        counts = self.scan["count"][rows]
        bounds = np.searchsorted(np.cumsum(counts), np.arange(self.chunk_records, counts.sum(),
                                                              self.chunk_records))
        for chunk in np.split(rows, bounds):
            if len(chunk):
                yield chunk

    def _decode_chunk(self, rows):
        s = self.scan
        arena = frames.build_arena(self.buf, s, rows)
        starts, owner = frames.record_starts(arena, s["count"][rows].tolist())
        f = frames.parse_frames(arena.array, starts)
        batch = rows[owner]
        attrs = s["attributes"][batch]
        meta = {
            "log_partition": np.full(len(starts), self.log_partition, dtype=np.int64),
            "log_offset": s["base_offset"][batch] + f.offset_delta,
            "timestamp": np.where(attrs & TIMESTAMP_LOG_APPEND, s["max_timestamp"][batch],
                                  s["base_timestamp"][batch] + f.ts_delta),
            "transactional": (attrs & TRANSACTIONAL) != 0,
            "producer_id": s["producer_id"][batch],
        }
        return arena, f, meta, offsets.key_types(arena.array, f)

    def commits(self) -> Iterator[pa.RecordBatch]:
        for rows in self._chunks():
            arena, f, meta, kt = self._decode_chunk(rows)
            sel = np.flatnonzero(np.isin(kt, offsets.OFFSET_COMMIT_TYPES))
            out = offsets.decode(arena.array, f, sel, meta)
            self.skipped_records += len(sel) - out.num_rows
            yield out

    def group_rows(self) -> Iterator[tuple]:
        """GroupMetadata records as tuples in GROUPS_SCHEMA order."""
        for rows in self._chunks():
            arena, f, meta, kt = self._decode_chunk(rows)
            for i in np.flatnonzero(kt == offsets.GROUP_METADATA_TYPE).tolist():
                row = group_row(arena.data, f, meta, i)
                if row is None:
                    self.skipped_records += 1
                else:
                    yield row

    def consumer_group_rows(self) -> Iterator[tuple]:
        """KIP-848 consumer group records (types 3-8, 16) as tuples in consumer_records.SCHEMA order."""
        types = np.array(consumer_records.TYPES)
        for rows in self._chunks():
            arena, f, meta, kt = self._decode_chunk(rows)
            for i in np.flatnonzero(np.isin(kt, types)).tolist():
                row = consumer_row(arena.data, f, meta, i)
                if row is None:
                    self.skipped_records += 1
                else:
                    yield row

    def share_state(self) -> Iterator[pa.RecordBatch]:
        """`__share_group_state` records (ShareSnapshot / ShareUpdate) in share_records.SCHEMA."""
        out = []
        for rows in self._chunks():
            arena, f, meta, kt = self._decode_chunk(rows)
            for i in np.flatnonzero(np.isin(kt, (share_records.SNAPSHOT, share_records.UPDATE))).tolist():
                kp, vp, vlen = int(f.key_pos[i]), int(f.value_pos[i]), int(f.value_len[i])
                row = share_records.row(
                    arena.data[kp:kp + int(f.key_len[i])], None if vlen < 0 else arena.data[vp:vp + vlen],
                    (int(meta["log_partition"][i]), int(meta["log_offset"][i]), int(meta["timestamp"][i])))
                if row is None:
                    self.skipped_records += 1
                else:
                    out.append(row)
        if out:
            yield share_records.to_batch(out)

    def consumer_groups(self) -> Iterator[pa.RecordBatch]:
        rows = list(self.consumer_group_rows())
        if rows:
            yield consumer_records.to_batch(rows)

    def groups(self) -> Iterator[pa.RecordBatch]:
        rows = list(self.group_rows())
        if rows:
            columns = list(zip(*rows, strict=True))
            yield pa.RecordBatch.from_arrays(
                [pa.array(c, type=f.type) for c, f in zip(columns, GROUPS_SCHEMA, strict=True)],
                schema=GROUPS_SCHEMA)


def _record_headers(data, pos, end) -> dict:
    c = group_metadata.Cursor(data, pos)
    out = {}

    def varint():
        v = c.uvarint()
        return (v >> 1) ^ -(v & 1)

    for _ in range(varint()):
        key = c.raw(varint())
        value = c.raw(varint())
        if c.pos > end:
            raise group_metadata.Truncated("headers")
        out[key.decode("utf-8", "replace")] = None if value is None else value.decode("utf-8", "replace")
    return out


def consumer_row(data, f, meta, i):
    kp, vp, vlen = int(f.key_pos[i]), int(f.value_pos[i]), int(f.value_len[i])
    try:
        headers = _record_headers(data, int(f.headers_pos[i]), int(f.end[i]))
    except (group_metadata.Truncated, UnicodeDecodeError):
        return None
    position = (int(meta["log_partition"][i]), int(meta["log_offset"][i]), int(meta["timestamp"][i]))
    return consumer_records.row(data[kp:kp + int(f.key_len[i])], None if vlen < 0 else data[vp:vp + vlen],
                                position, headers)


def group_row(data, f, meta, i):
    kp, vp, vlen = int(f.key_pos[i]), int(f.value_pos[i]), int(f.value_len[i])
    try:
        group = group_metadata.decode_key_group(data[kp:kp + int(f.key_len[i])])
        headers = _record_headers(data, int(f.headers_pos[i]), int(f.end[i]))
        value = None if vlen < 0 else group_metadata.decode_value(data[vp:vp + vlen])
    except (group_metadata.Truncated, UnicodeDecodeError):
        return None
    head = (int(meta["log_partition"][i]), int(meta["log_offset"][i]), int(meta["timestamp"][i]), group,
            value is None)
    if value is None:
        return head + (None,) * 7 + (headers,)
    members = [(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                m["rebalance_timeout_ms"], m["session_timeout_ms"], m["subscribed_topics"],
                m["assignment"]) + CLASSIC_ONLY for m in value["members"]]
    return head + (value["value_version"], value["protocol_type"], value["generation"], value["protocol"],
                   value["leader"], value["state_timestamp"], members, headers)


def batch_summaries(buf, topic, partition, verify_crc=True) -> pa.RecordBatch:
    """One row per valid batch: how far the partition's log had grown, and when."""
    s = batches.scan(buf, verify_crc)
    attrs = s["attributes"]
    cols = {
        "topic": pa.array([topic] * len(s), pa.string()),
        "partition": pa.array(np.full(len(s), partition, dtype=np.int32)),
        "base_offset": pa.array(s["base_offset"]),
        "last_offset": pa.array(s["base_offset"] + s["last_offset_delta"]),
        "record_count": pa.array(s["count"].astype(np.int32)),
        "base_timestamp": pa.array(s["base_timestamp"]),
        "max_timestamp": pa.array(s["max_timestamp"]),
        "producer_id": pa.array(s["producer_id"]),
        "transactional": pa.array((attrs & TRANSACTIONAL) != 0),
        "control": pa.array((attrs & CONTROL) != 0),
        "compression": pa.array((attrs & batches.COMPRESSION_MASK).astype(np.int8)),
        "size_bytes": pa.array((s["end"] - s["position"]).astype(np.int32)),
    }
    return pa.RecordBatch.from_arrays([cols[n] for n in BATCH_SCHEMA.names], schema=BATCH_SCHEMA)
