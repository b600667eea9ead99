"""A small decoder of OTLP `MetricsData` (opentelemetry-proto, metrics/v1/metrics.proto): the payload of a
KIP-714 PushTelemetry request, once decompressed.

Only what a broker shows of a client's metrics is read: each metric's name, kind and unit, and per data
point its attributes, time and value. Gauges and sums carry a number; histograms and summaries are kept
as their count and sum. Everything else (exemplars, schema urls, scopes' names, buckets) is skipped by
wire type, so a newer producer's extra fields do not break the decode. A hand decoder rather than the
protobuf runtime plus opentelemetry-proto: the subset is ~100 lines and needs no generated code.

Field numbers (metrics.proto / common.proto / resource.proto):
  MetricsData.resource_metrics 1; ResourceMetrics.resource 1, .scope_metrics 2; Resource.attributes 1;
  ScopeMetrics.metrics 2; Metric.name 1, .description 2, .unit 3, .gauge 5, .sum 7, .histogram 9,
  .exponential_histogram 10, .summary 11; Gauge/Sum/Histogram/... .data_points 1; Sum.is_monotonic 3;
  NumberDataPoint.time_unix_nano 3 (fixed64), .as_double 4 (double), .as_int 6 (sfixed64), .attributes 7;
  HistogramDataPoint .count 4 (fixed64), .sum 5 (double), .attributes 9; ExponentialHistogramDataPoint
  .count 4, .sum 5, .attributes 1; SummaryDataPoint .count 4, .sum 5, .attributes 7;
  KeyValue.key 1, .value 2; AnyValue string 1, bool 2, int 3, double 4, bytes 7.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.primitives import read_uvarlong

_DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")
_SFIXED64 = struct.Struct("<q")
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class OtlpError(ValueError):
    """The payload is not a MetricsData message."""


@dataclass(frozen=True, slots=True)
class DataPoint:
    metric: str                    # e.g. "org.apache.kafka.producer.node.request.latency.avg"
    kind: str                      # "gauge", "sum", "histogram", "exponential_histogram", "summary"
    value: float                   # the number; for histograms and summaries their sum
    attributes: tuple[tuple[str, str], ...] = ()
    time_unix_nano: int = 0
    unit: str = ""
    count: int | None = None       # histograms and summaries
    monotonic: bool = False        # sums


@dataclass(slots=True)
class MetricsData:
    resource: dict[str, str] = field(default_factory=dict)   # the client's resource attributes
    points: list[DataPoint] = field(default_factory=list)


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    try:
        return read_uvarlong(buf, pos)   # protobuf's base-128 varint is Kafka's unsigned varlong
    except DecodeError as exc:
        raise OtlpError(str(exc)) from None


def _fields(buf):
    """(field number, wire type, value) of one message: an int for varints and fixed ints, a memoryview
    for length-delimited fields."""
    buf = _bytes(buf)
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _I64:
            if pos + 8 > end:
                raise OtlpError("truncated 64-bit field")
            value, pos = _FIXED64.unpack_from(buf, pos)[0], pos + 8
        elif wire == _LEN:
            length, pos = _varint(buf, pos)
            if pos + length > end:
                raise OtlpError(f"field {number}: length {length} past the end")
            value, pos = buf[pos:pos + length], pos + length
        elif wire == _I32:
            if pos + 4 > end:
                raise OtlpError("truncated 32-bit field")
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise OtlpError(f"field {number}: unsupported wire type {wire}")
        yield number, wire, value


def _double(bits: int) -> float:
    return _DOUBLE.unpack(_FIXED64.pack(bits))[0]


def _text(value) -> str:
    return bytes(_bytes(value)).decode("utf-8", "replace")


def _bytes(value) -> memoryview:
    if not isinstance(value, memoryview):
        raise OtlpError("a number where a message, string or bytes was expected")
    return value


def _any_value(buf: memoryview) -> str:
    for number, wire, value in _fields(buf):
        if number == 1 and wire == _LEN:
            return _text(value)
        if number == 2 and wire == _VARINT:
            return "true" if value else "false"
        if number == 3 and wire == _VARINT:
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and wire == _I64:
            return repr(_double(value))
        if number == 7 and wire == _LEN:
            return bytes(_bytes(value)).hex()
    return ""   # arrays, key-value lists: not shown


def _key_value(buf: memoryview) -> tuple[str, str]:
    key = text = ""
    for number, _wire, value in _fields(buf):
        if number == 1:
            key = _text(value)
        elif number == 2:
            text = _any_value(value)
    return key, text


# per data point kind: (field of its attributes, whether it carries count + sum rather than a number)
_POINT_KINDS = {5: ("gauge", 7, False), 7: ("sum", 7, False), 9: ("histogram", 9, True),
                10: ("exponential_histogram", 1, True), 11: ("summary", 7, True)}


def _point(buf: memoryview, name: str, kind: str, attributes_field: int, aggregate: bool, unit: str,
           monotonic: bool) -> DataPoint:
    attributes: list[tuple[str, str]] = []
    value, count, when = 0.0, None, 0
    for number, wire, raw in _fields(buf):
        if number == attributes_field and wire == _LEN:
            attributes.append(_key_value(raw))
        elif number == 3 and wire == _I64:
            when = raw
        elif aggregate and number == 4 and wire == _I64:
            count = raw
        elif aggregate and number == 5 and wire == _I64:
            value = _double(raw)
        elif not aggregate and number == 4 and wire == _I64:
            value = _double(raw)
        elif not aggregate and number == 6 and wire == _I64:
            value = float(_SFIXED64.unpack(_FIXED64.pack(raw))[0])
    return DataPoint(name, kind, value, tuple(sorted(attributes)), when, unit, count, monotonic)


def _metric(buf: memoryview, out: list[DataPoint]) -> None:
    name = unit = ""
    bodies: list[tuple[int, memoryview]] = []
    for number, wire, value in _fields(buf):
        if number == 1:
            name = _text(value)
        elif number == 3:
            unit = _text(value)
        elif number in _POINT_KINDS and wire == _LEN:
            bodies.append((number, value))
    for number, body in bodies:
        kind, attributes_field, aggregate = _POINT_KINDS[number]
        points, monotonic = [], False
        for inner, _wire, value in _fields(body):
            if inner == 1:
                points.append(value)
            elif inner == 3 and number == 7:
                monotonic = bool(value)
        out.extend(_point(p, name, kind, attributes_field, aggregate, unit, monotonic) for p in points)


def decode_metrics_data(payload: bytes) -> MetricsData:
    """The data points of a serialized MetricsData; OtlpError when it does not parse."""
    data = MetricsData()
    for number, wire, resource_metrics in _fields(memoryview(payload)):
        if number != 1 or wire != _LEN:
            continue
        for inner, wire2, value in _fields(resource_metrics):
            if inner == 1 and wire2 == _LEN:
                for attr_number, _w, kv in _fields(value):
                    if attr_number == 1:
                        key, text = _key_value(kv)
                        data.resource[key] = text
            elif inner == 2 and wire2 == _LEN:
                for scope_number, _w, metric in _fields(value):
                    if scope_number == 2:
                        _metric(metric, data.points)
    return data
