"""An independent writer of Kafka-format stores for the analytics tests.

Batches come from kafka-python's MemoryRecordsBuilder; the __consumer_offsets keys and values are
laid out here by hand from the reference layouts (not with analytics' or protocol's code), so the
decoder under test is checked against a second implementation of the format.
"""
import os
import struct

import google_crc32c
from kafka.record.memory_records import MemoryRecordsBuilder

OFFSETS = "__consumer_offsets"


def _s(text):                                  # int16-length string; None -> -1
    if text is None:
        return struct.pack(">h", -1)
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def _b(data):                                  # int32-length bytes
    if data is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(data)) + data


def _uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def offset_commit_key(group, topic, partition, version=1):
    return struct.pack(">h", version) + _s(group) + _s(topic) + struct.pack(">i", partition)


def offset_commit_value(offset, commit_ts, version=3, leader_epoch=-1, metadata="", expire_ts=-1):
    if version == 4:
        md = metadata.encode()
        return (struct.pack(">hqi", 4, offset, leader_epoch) + _uvarint(len(md) + 1) + md
                + struct.pack(">q", commit_ts) + b"\x00")
    out = struct.pack(">hq", version, offset)
    if version == 3:
        out += struct.pack(">i", leader_epoch)
    out += _s(metadata) + struct.pack(">q", commit_ts)
    if version == 1:
        out += struct.pack(">q", expire_ts)
    return out


def group_metadata_key(group):
    return struct.pack(">h", 2) + _s(group)


def assignment(tps):
    """ConsumerProtocolAssignment v0 from {topic: [partitions]}."""
    out = struct.pack(">hi", 0, len(tps))
    for topic, parts in tps.items():
        out += _s(topic) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out + _b(None)


def subscription(topics):
    out = struct.pack(">hi", 0, len(topics)) + b"".join(_s(t) for t in topics)
    return out + _b(None)


def group_metadata_value(generation, protocol, leader, state_ts, members, protocol_type="consumer"):
    """v3. members: list of dicts member_id, instance_id, client_id, host, assignment ({topic: [p]}),
    topics."""
    out = struct.pack(">h", 3) + _s(protocol_type) + struct.pack(">i", generation) + _s(protocol) + _s(leader)
    out += struct.pack(">qi", state_ts, len(members))
    for m in members:
        out += (_s(m["member_id"]) + _s(m.get("instance_id")) + _s(m["client_id"]) + _s(m["host"])
                + struct.pack(">ii", 300000, 45000) + _b(subscription(m["topics"]))
                + _b(assignment(m["assignment"])))
    return out


def batch(records, base_offset, compression=0, transactional=False, producer_id=-1, control=False):
    """records: [(timestamp, key, value, headers)] -> one v2 batch (bytes)."""
    pid_args = {}
    if producer_id >= 0:
        pid_args = dict(producer_id=producer_id, producer_epoch=0, base_sequence=0)
    b = MemoryRecordsBuilder(2, compression, 1 << 24, offset=0, transactional=transactional, **pid_args)
    for ts, key, value, headers in records:
        assert b.append(ts, key, value, headers or []) is not None
    b.close()
    out = bytearray(b.buffer())
    struct.pack_into(">q", out, 0, base_offset)   # as a broker does; the CRC does not cover it
    if control:                                 # builders never write control batches: patch the bit
        attrs = struct.unpack_from(">h", out, 21)[0] | 0x20
        struct.pack_into(">h", out, 21, attrs)
        struct.pack_into(">I", out, 17, google_crc32c.value(bytes(out[21:])))
    return bytes(out)


def marker(producer_id, base_offset, ts, commit):
    key = struct.pack(">hh", 0, 1 if commit else 0)
    return batch([(ts, key, struct.pack(">hi", 0, 0), None)], base_offset, transactional=True,
                 producer_id=producer_id, control=True)


class PartitionWriter:
    """Appends batches to `<root>/<topic>-<partition>/`, rolling a new segment on request."""

    def __init__(self, root, topic, partition):
        self.dir = os.path.join(root, f"{topic}-{partition}")
        os.makedirs(self.dir, exist_ok=True)
        self.next_offset = 0
        self.path = None
        self.roll()

    def roll(self):
        self.path = os.path.join(self.dir, f"{self.next_offset:020d}.log")
        open(self.path, "ab").close()

    def append(self, records, **kw):
        """Returns the base offset used."""
        base = self.next_offset
        data = batch(records, base, **kw)
        with open(self.path, "ab") as f:
            f.write(data)
        self.next_offset += len(records)
        return base

    def append_marker(self, producer_id, ts, commit):
        with open(self.path, "ab") as f:
            f.write(marker(producer_id, self.next_offset, ts, commit))
        self.next_offset += 1

    def append_raw(self, data):
        with open(self.path, "ab") as f:
            f.write(data)
