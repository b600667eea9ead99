"""Just enough of the consumer protocol (protocol type "consumer") to know which topics a group reads.

ConsumerProtocolSubscription, every version starts with:
    version INT16, topics ARRAY of STRING (INT32 count, INT16 length + UTF-8 each), user_data BYTES, ...
(v1 adds owned partitions, v2 generation id, v3 rack id - all after the topics, so not read here).
"""
from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscription_topics(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription, or None if the bytes are not one."""
    try:
        (version,) = _I16.unpack_from(metadata, 0)
        (count,) = _I32.unpack_from(metadata, 2)
        if version < 0 or count < 0:
            return None
        pos, topics = 6, set()
        for _ in range(count):
            (n,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.add(bytes(metadata[pos:pos + n]).decode("utf-8"))
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def encode_subscription(topics: list[str], user_data: bytes = b"", version: int = 0) -> bytes:
    """A v0 subscription; used by tests and tools."""
    out = [_I16.pack(version), _I32.pack(len(topics))]
    for t in topics:
        b = t.encode("utf-8")
        out += [_I16.pack(len(b)), b]
    out += [_I32.pack(len(user_data)), user_data]
    return b"".join(out)
