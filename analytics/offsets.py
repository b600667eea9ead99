"""OffsetCommitKey / OffsetCommitValue (key types 0 and 1), decoded for many records at once.

Key:   int16 type | group string | topic string | partition int32
Value: int16 version | offset int64 | leader_epoch int32 (v3+) | metadata (v0-3: int16-length string,
       v4: compact string) | commit_timestamp int64 | expire_timestamp int64 (v1 only) | tagged fields (v4)
A null value is a tombstone: the offset was deleted or expired.
"""
import numpy as np
import pyarrow as pa

from kcoord.analytics import vector
from kcoord.analytics.frames import Frames

OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA_TYPE = 2

SCHEMA = pa.schema([
    ("log_partition", pa.int32()),        # N of __consumer_offsets-N
    ("log_offset", pa.int64()),
    ("timestamp", pa.int64()),            # record timestamp, ms
    ("group", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("current_offset", pa.int64()),       # the committed offset (kafka-consumer-groups CURRENT-OFFSET)
    ("leader_epoch", pa.int32()),
    ("metadata", pa.string()),
    ("commit_timestamp", pa.int64()),
    ("expire_timestamp", pa.int64()),
    ("value_version", pa.int16()),
    ("tombstone", pa.bool_()),
    ("transactional", pa.bool_()),
    ("producer_id", pa.int64()),
])


def key_types(a: np.ndarray, frames: Frames) -> np.ndarray:
    """The record type (key version) of every record; -1 where the key is too short or missing."""
    kt = vector.be_int(a, frames.key_pos, 2)
    return np.where(frames.ok & (frames.key_len >= 2), kt, -1)


def decode(a: np.ndarray, f: Frames, sel: np.ndarray, meta: dict) -> pa.RecordBatch:
    """Offset-commit rows for the records `sel` (indices into `f`). `meta` holds per-record
    log_partition / log_offset / timestamp / transactional / producer_id arrays aligned with `f`.
    Records whose fields do not fit in their key/value are dropped."""
    kp, klen = f.key_pos[sel], f.key_len[sel]
    group_len = vector.be_int(a, kp + 2, 2)
    group_pos = kp + 4
    topic_len_pos = group_pos + np.maximum(group_len, 0)
    topic_len = vector.be_int(a, topic_len_pos, 2)
    topic_pos = topic_len_pos + 2
    part_pos = topic_pos + np.maximum(topic_len, 0)
    ok = (part_pos + 4 <= kp + klen) & (group_len >= 0) & (topic_len >= 0)

    vp, vlen = f.value_pos[sel], f.value_len[sel]
    tomb = vlen < 0
    version = vector.be_int(a, vp, 2)
    has_epoch = version >= 3
    flexible = version >= 4
    meta_len_pos = np.where(has_epoch, vp + 14, vp + 10)
    compact_len, compact_size = vector.varint(a, meta_len_pos, zigzag=False)
    meta_len = np.where(flexible, compact_len - 1, vector.be_int(a, meta_len_pos, 2))
    meta_pos = meta_len_pos + np.where(flexible, compact_size, 2)
    commit_ts_pos = meta_pos + np.maximum(meta_len, 0)
    value_end = commit_ts_pos + np.where(version == 1, 16, 8)
    ok &= tomb | ((value_end <= vp + vlen) & (version >= 0))

    keep = np.flatnonzero(ok)
    sel, tomb, version = sel[keep], tomb[keep], version[keep]
    has_epoch, meta_pos, commit_ts_pos = has_epoch[keep], meta_pos[keep], commit_ts_pos[keep]
    vp = vp[keep]

    def nullable(values, null):
        return pa.array(values, mask=null)

    columns = {
        "log_partition": pa.array(meta["log_partition"][sel].astype(np.int32)),
        "log_offset": pa.array(meta["log_offset"][sel]),
        "timestamp": pa.array(meta["timestamp"][sel]),
        "group": vector.strings(a, group_pos[keep], group_len[keep]),
        "topic": vector.strings(a, topic_pos[keep], topic_len[keep]),
        "partition": pa.array(vector.be_int(a, part_pos[keep], 4).astype(np.int32)),
        "current_offset": nullable(vector.be_int(a, vp + 2, 8), tomb),
        "leader_epoch": nullable(np.where(has_epoch, vector.be_int(a, vp + 10, 4), -1).astype(np.int32),
                                 tomb),
        "metadata": vector.strings(a, meta_pos, np.where(tomb, 0, meta_len[keep])),
        "commit_timestamp": nullable(vector.be_int(a, commit_ts_pos, 8), tomb),
        "expire_timestamp": nullable(np.where(version == 1, vector.be_int(a, commit_ts_pos + 8, 8), -1),
                                     tomb),
        "value_version": nullable(version.astype(np.int16), tomb),
        "tombstone": pa.array(tomb),
        "transactional": pa.array(meta["transactional"][sel]),
        "producer_id": pa.array(meta["producer_id"][sel]),
    }
    return pa.RecordBatch.from_arrays([columns[n] for n in SCHEMA.names], schema=SCHEMA)
