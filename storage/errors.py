"""Storage errors. Every failure the storage engine reports is a StorageError (or a subclass);
each names the Kafka error code a broker answers it with."""
from __future__ import annotations

from kcoord.protocol.errors import ErrorCode


class StorageError(Exception):
    """A log operation failed; the cause (an OSError, usually) is chained."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class CorruptRecordError(StorageError):
    """An appended record set is not whole, valid v2 batches."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class OffsetOutOfRangeError(StorageError):
    """A read below the log start offset or past the log end offset."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class RecordTooLargeError(StorageError):
    """A record set larger than a segment (it would never fit one)."""

    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class UnexpectedAppendOffsetError(StorageError):
    """A follower's append starts below the log end (Kafka's UnexpectedAppendOffsetException): the
    replica must truncate before it appends what its leader sent."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class OffsetsOutOfOrderError(StorageError):
    """A follower's record set whose offsets go back (Kafka's OffsetsOutOfOrderException)."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR
