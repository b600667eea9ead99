"""A tiny OTLP MetricsData encoder for tests: an independent writer of the protobuf wire format the
decoder under test (kcoord.protocol.otlp) reads, field numbers from opentelemetry-proto's
metrics.proto / common.proto."""
from __future__ import annotations

import struct


def varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def message(number: int, body: bytes) -> bytes:
    return tag(number, 2) + varint(len(body)) + body


def string(number: int, text: str) -> bytes:
    return message(number, text.encode())


def fixed64(number: int, value: int) -> bytes:
    return tag(number, 1) + struct.pack("<Q", value)


def double(number: int, value: float) -> bytes:
    return tag(number, 1) + struct.pack("<d", value)


def key_value(key: str, value: str | int) -> bytes:
    any_value = string(1, value) if isinstance(value, str) else tag(3, 0) + varint(value)
    return string(1, key) + message(2, any_value)


def number_point(value: float | int, attributes: dict[str, str | int] | None = None, time_ns: int = 1) -> bytes:
    body = fixed64(3, time_ns)
    body += double(4, value) if isinstance(value, float) else tag(6, 1) + struct.pack("<q", value)
    for k, v in (attributes or {}).items():
        body += message(7, key_value(k, v))
    return body


def gauge(name: str, *points: bytes, unit: str = "") -> bytes:
    return string(1, name) + (string(3, unit) if unit else b"") + message(5, b"".join(message(1, p) for p in points))


def monotonic_sum(name: str, *points: bytes) -> bytes:
    body = b"".join(message(1, p) for p in points) + tag(2, 0) + varint(2) + tag(3, 0) + varint(1)
    return string(1, name) + message(7, body)


def histogram(name: str, count: int, total: float) -> bytes:
    point = fixed64(3, 1) + fixed64(4, count) + double(5, total)
    return string(1, name) + message(9, message(1, point))


def metrics_data(*metrics: bytes, resource: dict[str, str] | None = None) -> bytes:
    res = b"".join(message(1, key_value(k, v)) for k, v in (resource or {}).items())
    scope = message(1, string(1, "librdkafka")) + b"".join(message(2, m) for m in metrics)
    return message(1, message(1, res) + message(2, scope))
