"""`__transaction_state` record formats, as Kafka writes them (TransactionLogKey v0, TransactionLogValue v0,
transaction-coordinator/src/main/resources/common/message/*.json; TransactionLog.keyToBytes/valueToBytes).

Key:   int16 version (0), string transactional_id.
Value: int16 version (0), int64 producer_id, int16 producer_epoch, int32 transaction_timeout_ms,
       int8 transaction_status, nullable array of (string topic, array of int32 partition ids),
       int64 last_update_timestamp_ms, int64 start_timestamp_ms.
The value's partitions are null for an Empty transaction. A delete is a null value.
Version 1 (flexible: compact strings and arrays, tagged fields) is what Kafka writes once transaction.version
is 1 or more (TransactionVersion.transactionLogValueVersion); its tagged fields carry what transaction
version 2 needs across a load: PreviousProducerId (tag 0), NextProducerId (tag 1, the id a transaction
that exhausted its epoch moves to when it completes) and ClientTransactionVersion (tag 2, int16).
kcoord writes the version its caller asks for and reads both.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.primitives import read_uvarint, uvarint_bytes

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")   # version, producer id, epoch, timeout, status
_VALUE_TAIL = struct.Struct(">qq")      # last update, start
_FLEX_HEAD = struct.Struct(">qhib")     # v1 after its version: producer id, epoch, timeout, status
_I64 = struct.Struct(">q")
NO_ID = -1
TAG_PREVIOUS_PRODUCER_ID, TAG_NEXT_PRODUCER_ID, TAG_CLIENT_TRANSACTION_VERSION = 0, 1, 2


class TransactionLogValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, int], ...] | None  # None: an Empty transaction
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = NO_ID   # v1 tagged fields (defaults: what v0 means)
    next_producer_id: int = NO_ID
    client_transaction_version: int = 0


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


def encode_value(v: TransactionLogValue, version: int = 0) -> bytes:
    if version >= 1:
        return _encode_v1(v)
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


def _encode_v1(v: TransactionLogValue) -> bytes:
    out = [_I16.pack(1), _FLEX_HEAD.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.status)]
    if v.partitions is None:
        out.append(uvarint_bytes(0))
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(v.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(uvarint_bytes(len(by_topic) + 1))
        for topic, ids in by_topic.items():
            raw = topic.encode("utf-8")
            out += [uvarint_bytes(len(raw) + 1), raw, uvarint_bytes(len(ids) + 1),
                    struct.pack(f">{len(ids)}i", *ids), uvarint_bytes(0)]  # no tagged fields per topic
    out.append(_VALUE_TAIL.pack(v.last_update_ms, v.start_ms))
    tags = []  # only fields away from their default are written, as Kafka's generated writers do
    if v.previous_producer_id != NO_ID:
        tags.append((TAG_PREVIOUS_PRODUCER_ID, _I64.pack(v.previous_producer_id)))
    if v.next_producer_id != NO_ID:
        tags.append((TAG_NEXT_PRODUCER_ID, _I64.pack(v.next_producer_id)))
    if v.client_transaction_version != 0:
        tags.append((TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(v.client_transaction_version)))
    out.append(uvarint_bytes(len(tags)))
    for tag, data in tags:
        out += [uvarint_bytes(tag), uvarint_bytes(len(data)), data]
    return b"".join(out)


def _decode_v1(buf: bytes) -> TransactionLogValue:
    pid, epoch, timeout, status = _FLEX_HEAD.unpack_from(buf, 2)
    pos = 2 + _FLEX_HEAD.size
    count, pos = read_uvarint(buf, pos)
    partitions: list[tuple[str, int]] | None = None
    if count > 0:
        partitions = []
        for _ in range(count - 1):
            n, pos = read_uvarint(buf, pos)
            if n < 1 or pos + n - 1 > len(buf):
                raise DecodeError(f"bad topic length {n - 1} in a __transaction_state record")
            topic = bytes(buf[pos:pos + n - 1]).decode("utf-8")
            pos += n - 1
            n, pos = read_uvarint(buf, pos)
            ids = struct.unpack_from(f">{max(n - 1, 0)}i", buf, pos)
            pos += 4 * len(ids)
            partitions += [(topic, p) for p in ids]
            pos = _skip_tags(buf, pos)
    last_update, start = _VALUE_TAIL.unpack_from(buf, pos)
    pos += _VALUE_TAIL.size
    previous, following, client_version = NO_ID, NO_ID, 0
    tags, pos = read_uvarint(buf, pos)
    for _ in range(tags):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if tag == TAG_PREVIOUS_PRODUCER_ID:
            (previous,) = _I64.unpack_from(buf, pos)
        elif tag == TAG_NEXT_PRODUCER_ID:
            (following,) = _I64.unpack_from(buf, pos)
        elif tag == TAG_CLIENT_TRANSACTION_VERSION:
            (client_version,) = _I16.unpack_from(buf, pos)
        pos += size  # unknown tags are skipped, as flexible versions allow
    return TransactionLogValue(pid, epoch, timeout, status, None if partitions is None else tuple(partitions),
                               last_update, start, previous, following, client_version)


def _skip_tags(buf: bytes, pos: int) -> int:
    tags, pos = read_uvarint(buf, pos)
    for _ in range(tags):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
    return pos


def decode_value(buf: bytes) -> TransactionLogValue:
    try:
        version, pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(buf, 0)
        if version == 1:
            return _decode_v1(buf)
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
