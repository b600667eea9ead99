"""storage: partition logs in Kafka's on-disk layout (segments, index, group commit, recovery, compaction).

Knows bytes and offsets, never groups. May import: protocol (record batches).
"""
from storage.config import LogConfig
from storage.errors import CorruptRecordError, OffsetOutOfRangeError, RecordTooLargeError, StorageError
from storage.fs import FS, FaultyFS
from storage.log import AppendInfo, PartitionLog
from storage.manager import LogManager

__all__ = ["AppendInfo", "CorruptRecordError", "FS", "FaultyFS", "LogConfig", "LogManager",
           "OffsetOutOfRangeError", "PartitionLog", "RecordTooLargeError", "StorageError"]
