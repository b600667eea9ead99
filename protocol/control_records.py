"""Transaction markers: the control record a COMMIT or ABORT writes (Kafka's ControlRecordType and
EndTransactionMarker, clients/src/main/java/org/apache/kafka/common/record/).

A marker is a batch with the transactional and control attributes, the transaction's producer id and
epoch, and one record: key = int16 version (0) + int16 type (0 ABORT, 1 COMMIT), value = int16 version
(0) + int32 coordinator epoch. Data partitions and `__consumer_offsets` get the same batch.
"""
from __future__ import annotations

import struct

from kcoord.protocol.records import build_batch

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
ABORT, COMMIT = 0, 1


def marker_key(commit: bool) -> bytes:
    return _KEY.pack(0, COMMIT if commit else ABORT)


def marker_type(key: bytes | None) -> int | None:
    """ABORT, COMMIT, or None for a key that is no transaction marker."""
    if key is None or len(key) < _KEY.size:
        return None
    kind = _KEY.unpack_from(key)[1]
    return kind if kind in (ABORT, COMMIT) else None


def marker_coordinator_epoch(value: bytes | None) -> int:
    """The coordinator epoch a marker's value carries (-1 for a value too short to hold one)."""
    if value is None or len(value) < _VALUE.size:
        return -1
    return _VALUE.unpack_from(value)[1]


def end_txn_marker_batch(producer_id: int, epoch: int, commit: bool, coordinator_epoch: int = 0,
                         timestamp_ms: int | None = None) -> bytes:
    return build_batch([(marker_key(commit), _VALUE.pack(0, coordinator_epoch))], producer_id=producer_id,
                       producer_epoch=epoch, transactional=True, control=True, timestamp_ms=timestamp_ms)
