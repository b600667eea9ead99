"""storage: partition logs in Kafka's on-disk layout (segments, index, group commit, recovery, compaction).

Knows bytes and offsets, never groups. May import: protocol (record batches).

    manager.py       LogManager: every `<topic>-<partition>` dir under log.dirs; topic deletion; maintenance;
                     the clean-shutdown marker, the recovery-point and high-watermark checkpoints
    log.py           PartitionLog: append as leader (offsets assigned in place) or as follower (kept), become_leader,
                     sync, read, truncate, retention
    log_loader.py    opening a log's segments: recovered past the recovery point, else trusted (sanity-checked)
    group_commit.py  many sync() callers share one fsync, run in a worker thread
    segment.py       one `<20-digit base offset>.log` with its `.index` / `.timeindex`; recovery scan
    index.py         the sparse offset and time indexes (derived, rebuilt when they disagree)
    cleaner.py       compaction's worker-thread half: latest per key, tombstone horizons, `.cleaned` files
    reader.py        read-only iteration over segment files (tools, analytics)
    checkpoint.py    Kafka's offset checkpoint file format (cleaner-, recovery-point-, log-start-offset- and
                     replication-offset-checkpoint)
    fs.py            the file-system layer all I/O goes through, and FaultyFS for tests
    config.py        LogConfig (Kafka's topic-config names and defaults); errors.py: StorageError family
"""
from kcoord.storage.config import LogConfig
from kcoord.storage.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from kcoord.storage.fs import FS, FaultyFS
from kcoord.storage.log import AppendInfo, PartitionLog
from kcoord.storage.manager import LogManager

__all__ = ["AppendInfo", "CorruptRecordError", "FS", "FaultyFS", "LogConfig", "LogManager",
           "OffsetOutOfRangeError", "OffsetsOutOfOrderError", "PartitionLog", "RecordTooLargeError", "StorageError",
           "UnexpectedAppendOffsetError"]
