"""`__transaction_state` record formats, as Kafka writes them (TransactionLogKey v0, TransactionLogValue v0,
transaction-coordinator/src/main/resources/common/message/*.json; TransactionLog.keyToBytes/valueToBytes).

Key:   int16 version (0), string transactional_id.
Value: int16 version (0), int64 producer_id, int16 producer_epoch, int32 transaction_timeout_ms,
       int8 transaction_status, nullable array of (string topic, array of int32 partition ids),
       int64 last_update_timestamp_ms, int64 start_timestamp_ms.
The value's partitions are null for an Empty transaction. Version 1 (flexible, with tagged fields) is what
Kafka writes once transaction.version 2 is finalized; kcoord writes and reads version 0.
A delete is a null value.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from kcoord.protocol.errors import DecodeError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")   # version, producer id, epoch, timeout, status
_VALUE_TAIL = struct.Struct(">qq")      # last update, start


class TransactionLogValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, int], ...] | None  # None: an Empty transaction
    last_update_ms: int
    start_ms: int


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0 or pos + n > len(buf):
        raise DecodeError(f"bad string length {n} in a __transaction_state record")
    return bytes(buf[pos:pos + n]).decode("utf-8"), pos + n


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + _string(transactional_id)


def decode_key(buf: bytes) -> str:
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != 0:
            raise DecodeError(f"unknown TransactionLogKey version {version}")
        return _read_string(buf, 2)[0]
    except (struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"bad TransactionLogKey: {exc}") from exc


def encode_value(v: TransactionLogValue) -> bytes:
    out = [_VALUE_HEAD.pack(0, v.producer_id, v.producer_epoch, v.timeout_ms, v.status)]
    if v.partitions is None:
        out.append(_I32.pack(-1))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(v.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(_I32.pack(len(by_topic)))
        for topic, ids in by_topic.items():
            out.append(_string(topic))
            out.append(_I32.pack(len(ids)))
            out.append(struct.pack(f">{len(ids)}i", *ids))
    out.append(_VALUE_TAIL.pack(v.last_update_ms, v.start_ms))
    return b"".join(out)


def decode_value(buf: bytes) -> TransactionLogValue:
    try:
        version, pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(buf, 0)
        if version != 0:
            raise DecodeError(f"unsupported TransactionLogValue version {version}")
        pos = _VALUE_HEAD.size
        (count,) = _I32.unpack_from(buf, pos)
        pos += 4
        partitions: list[tuple[str, int]] | None = None
        if count >= 0:
            partitions = []
            for _ in range(count):
                topic, pos = _read_string(buf, pos)
                (n,) = _I32.unpack_from(buf, pos)
                pos += 4
                partitions += [(topic, p) for p in struct.unpack_from(f">{n}i", buf, pos)]
                pos += 4 * n
        last_update, start = _VALUE_TAIL.unpack_from(buf, pos)
    except (struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"bad TransactionLogValue: {exc}") from exc
    return TransactionLogValue(pid, epoch, timeout, status, None if partitions is None else tuple(partitions),
                               last_update, start)
