"""GroupMetadataValue (key type 2) and the consumer protocol's subscription/assignment bytes.

These records are rare next to offset commits (one per completed generation), so they are decoded
one at a time with a small cursor rather than vectorised. Layouts: GroupMetadataValue.json v0-v4
(v4 flexible), ConsumerProtocolSubscription v0-v3 and ConsumerProtocolAssignment v0-v3.
"""
import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Truncated(ValueError):
    pass


class Cursor:
    """Reads Kafka primitives; `flexible` switches strings/bytes/arrays to their compact forms."""

    def __init__(self, data, pos=0, flexible=False):
        self.data, self.pos, self.flexible = data, pos, flexible

    def _fixed(self, st):
        if self.pos + st.size > len(self.data):
            raise Truncated(f"need {st.size} bytes at {self.pos}")
        (v,) = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return v

    def int16(self):
        return self._fixed(_I16)

    def int32(self):
        return self._fixed(_I32)

    def int64(self):
        return self._fixed(_I64)

    def uvarint(self):
        value = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise Truncated("varint")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def _length(self, fixed):
        return self.uvarint() - 1 if self.flexible else fixed()

    def raw(self, n):
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise Truncated(f"need {n} bytes at {self.pos}")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def string(self):
        b = self.raw(self._length(self.int16))
        return None if b is None else b.decode("utf-8", "replace")

    def bytes_(self):
        return self.raw(self._length(self.int32))

    def array(self, item):
        n = self._length(self.int32)
        return None if n < 0 else [item() for _ in range(n)]

    def tagged_fields(self):
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.raw(self.uvarint())


def _topic_partitions(c: Cursor):
    topic = c.string()
    return [(topic, p) for p in c.array(c.int32) or []]


def decode_assignment(data):
    """[(topic, partition)] from ConsumerProtocolAssignment bytes; None if they do not parse."""
    if not data:
        return []
    try:
        c = Cursor(data)
        c.int16()                                        # version: all known ones share this prefix
        return sorted(tp for tps in c.array(lambda: _topic_partitions(c)) or [] for tp in tps)
    except (Truncated, UnicodeDecodeError):
        return None


def decode_subscription_topics(data):
    """The subscribed topics from ConsumerProtocolSubscription bytes; None if they do not parse."""
    if not data:
        return []
    try:
        c = Cursor(data)
        c.int16()
        return sorted(c.array(c.string) or [])
    except (Truncated, UnicodeDecodeError):
        return None


def decode_key_group(key) -> str:
    """The group id of a GroupMetadataKey (after its int16 type)."""
    return Cursor(key, 2).string()


def decode_value(value) -> dict:
    """GroupMetadataValue v0-v4 as a dict; members as a list of dicts (assignment decoded)."""
    c = Cursor(value)
    version = c.int16()
    c.flexible = version >= 4
    out = {"value_version": version, "protocol_type": c.string(), "generation": c.int32(),
           "protocol": c.string(), "leader": c.string(),
           "state_timestamp": c.int64() if version >= 2 else -1}
    consumer = out["protocol_type"] == "consumer"

    def member():
        m = {"member_id": c.string(), "group_instance_id": c.string() if version >= 3 else None,
             "client_id": c.string(), "client_host": c.string()}
        rebalance = c.int32() if version >= 1 else None
        m["session_timeout_ms"] = c.int32()
        m["rebalance_timeout_ms"] = m["session_timeout_ms"] if rebalance is None else rebalance
        subscription, assignment = c.bytes_(), c.bytes_()
        c.tagged_fields()
        m["subscribed_topics"] = decode_subscription_topics(subscription) if consumer else None
        m["assignment"] = decode_assignment(assignment) if consumer else None
        return m

    out["members"] = c.array(member) or []
    c.tagged_fields()
    return out
