"""Validation of the record batches a producer sends, before they reach the log.

Kafka's rules (LogValidator + ProduceRequest validation) for Produce v3+: exactly one batch per
partition, magic 2 (UNSUPPORTED_FOR_MESSAGE_FORMAT for older formats), a whole batch whose CRC-32C
matches (CORRUPT_MESSAGE otherwise), no bigger than max.message.bytes (MESSAGE_TOO_LARGE).
"""
from __future__ import annotations

from kcoord.protocol.errors import DecodeError, ErrorCode
from kcoord.protocol.records import (
    HEADER_SIZE,
    MAGIC_OFFSET,
    BatchHeader,
    batch_crc,
    parse_batch_header,
)


class BatchRejected(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_produce_records(records: bytes | memoryview | None, max_message_bytes: int) -> BatchHeader:
    """Return the header of the single valid batch in `records`, or raise BatchRejected."""
    if not records:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, "no record batch in the produce request")
    size = len(records)
    if size > max_message_bytes:
        raise BatchRejected(ErrorCode.MESSAGE_TOO_LARGE,
                            f"record batch of {size} bytes exceeds max.message.bytes {max_message_bytes}")
    if size <= MAGIC_OFFSET:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"record batch truncated at {size} bytes")
    magic = records[MAGIC_OFFSET]
    if magic != 2:
        raise BatchRejected(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                            f"record batch magic {magic}: this broker stores only magic 2")
    if size < HEADER_SIZE:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"record batch truncated at {size} bytes")
    try:
        header = parse_batch_header(records, 0)
    except DecodeError as exc:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, f"bad record batch header: {exc}") from exc
    if header.size != size:
        if header.size > size:
            raise BatchRejected(ErrorCode.CORRUPT_MESSAGE,
                                f"record batch claims {header.size} bytes, request carries {size}")
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            "Produce v3+ must carry exactly one record batch per partition")
    if batch_crc(records[:size]) != header.crc:
        raise BatchRejected(ErrorCode.CORRUPT_MESSAGE, "record batch CRC-32C mismatch")
    if header.is_control:
        raise BatchRejected(ErrorCode.INVALID_RECORD, "clients may not produce control batches")
    if header.records_count != header.last_offset_delta + 1:
        raise BatchRejected(ErrorCode.INVALID_RECORD,
                            f"record count {header.records_count} does not match last offset delta "
                            f"{header.last_offset_delta}")
    return header
