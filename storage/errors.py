"""Storage errors. Every failure the storage engine reports is a StorageError (or a subclass)."""
from __future__ import annotations


class StorageError(Exception):
    """A log operation failed; the cause (an OSError, usually) is chained."""


class CorruptRecordError(StorageError):
    """An appended record set is not whole, valid v2 batches (Kafka: CORRUPT_MESSAGE)."""


class OffsetOutOfRangeError(StorageError):
    """A read below the log start offset or past the log end offset (Kafka: OFFSET_OUT_OF_RANGE)."""


class RecordTooLargeError(StorageError):
    """A batch larger than the segment size (Kafka: RECORD_TOO_LARGE / MESSAGE_TOO_LARGE)."""
