"""KIP-848 consumer group histories written as `__consumer_offsets` records, with the truth to check.

Records are encoded by kcoord's coordinator (coordinator/consumer/records.py, generated from Kafka's
message definitions), a second implementation next to analytics' own decoder; what kcoord does not
write (Kafka 4.1's MetadataHash tag, the regular-expression record of key type 16, a migrated member's
ClassicMemberMetadata) is laid out here by hand from Kafka's JSON definitions. Epoch records carry no
kcoord.rebalance.* headers, as in a Kafka broker's store: causes must come from the records.
"""
import struct
import uuid
from dataclasses import dataclass

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.member import ConsumerGroupMember
from kcoord.protocol import messages as m
from tests.analytics import scenario
from tests.analytics import storegen as g

T0 = scenario.T0 + 10_000_000
ORDERS, EVENTS = uuid.UUID(int=0xA1), uuid.UUID(int=0xB2)
NAMES = {ORDERS: "orders", EVENTS: "events"}


@dataclass
class Epoch:
    group: str
    epoch: int
    cause: str                 # what the records show
    members: set
    target: dict | None        # member -> {(topic, partition)}; None: never computed for this epoch
    timestamp: int
    reconciled: int | None = None


def _uvarint(n):
    return g._uvarint(n)


def _compact(text):
    b = text.encode()
    return _uvarint(len(b) + 1) + b


def epoch_with_hash(group, epoch, metadata_hash):
    """ConsumerGroupMetadataValue v0 with Kafka 4.1's tagged MetadataHash (tag 0, int64)."""
    value = struct.pack(">hi", 0, epoch) + _uvarint(1) + _uvarint(0) + _uvarint(8) + struct.pack(">q", metadata_hash)
    return r.group_epoch_record(group, epoch)[0], value, ()


def regex_record(group, regex, topics, version, ts):
    """ConsumerGroupRegularExpressionKey (type 16) / Value v0."""
    key = struct.pack(">h", 16) + g._s(group) + g._s(regex)
    value = (struct.pack(">h", 0) + _uvarint(len(topics) + 1) + b"".join(_compact(t) for t in topics)
             + struct.pack(">qq", version, ts) + b"\x00")
    return key, value, ()


def classic_member_record(group, member_id, topics, session_timeout_ms):
    """A classic-protocol member of a consumer group (after an upgrade): ClassicMemberMetadata is set."""
    cls = m.message_class("ConsumerGroupMemberMetadataValue")
    classic = cls.ClassicMemberMetadata(session_timeout_ms=session_timeout_ms, supported_protocols=[
        cls.ClassicMemberMetadata.ClassicProtocol(name="range", metadata=b"\x00\x03")])
    value = cls(instance_id=None, rack_id=None, client_id=member_id, client_host="/127.0.0.1",
                subscribed_topic_names=topics, subscribed_topic_regex=None, rebalance_timeout_ms=30000,
                server_assignor=None, classic_member_metadata=classic)
    return r._key(r.MEMBER_METADATA, group, member_id), m.encode_versioned(
        "ConsumerGroupMemberMetadataValue", value, 0), ()


def member(mid, topics=(), regex=None, assignor=None):
    return ConsumerGroupMember(mid, client_id=f"client-{mid}", client_host="/127.0.0.1", rebalance_timeout_ms=30000,
                               subscribed_topic_names=frozenset(topics), subscribed_topic_regex=regex,
                               server_assignor_name=assignor)


def _assignment(tps):
    out = {}
    for topic_id, p in tps:
        out.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def current(group, mid, epoch, owned, pending=()):
    return r.current_assignment_record(group, ConsumerGroupMember(
        mid, member_epoch=epoch, previous_member_epoch=epoch - 1, assigned_partitions=_assignment(owned),
        partitions_pending_revocation=_assignment(pending)))


def target(group, epoch, per_member):
    return [r.target_member_record(group, mid, _assignment(tps)) for mid, tps in per_member.items()] + \
        [r.target_epoch_record(group, epoch)]


def named(per_member):
    return {mid: {(NAMES[t], p) for t, p in tps} for mid, tps in per_member.items()}


def o(*ps):
    return [(ORDERS, p) for p in ps]


def e(*ps):
    return [(EVENTS, p) for p in ps]


class History:
    """Appends one batch per step to the group's `__consumer_offsets` partition."""

    def __init__(self, store: scenario.Store):
        self.store = store

    def step(self, group, ts, recs):
        w = self.store.writer(g.OFFSETS, scenario.offsets_partition(group))
        w.append([(ts, key, value, list(headers)) for key, value, headers in recs])


def write(store: scenario.Store) -> list[Epoch]:
    """The consumer groups' histories; returns every epoch they went through."""
    h, out = History(store), []
    gid, t = "cg-orders", T0
    m1, m2 = member("m1", ["orders"], assignor="range"), member("m2", ["orders"], assignor="range")
    meta4 = {"orders": (ORDERS, 4)}
    tgt = {"m1": o(0, 1, 2, 3)}
    h.step(gid, t, [r.member_subscription_record(gid, m1), r.subscription_metadata_record(gid, meta4),
                    r.group_epoch_record(gid, 1), *target(gid, 1, tgt)])
    h.step(gid, t + 40, [current(gid, "m1", 1, o(0, 1, 2, 3))])
    out.append(Epoch(gid, 1, "member_joined", {"m1"}, named(tgt), t, reconciled=t + 40))

    t += 1000      # m2 joins; m1 revokes 2 and 3 before m2 gets them
    tgt = {"m1": o(0, 1), "m2": o(2, 3)}
    h.step(gid, t, [r.member_subscription_record(gid, m2), r.group_epoch_record(gid, 2), *target(gid, 2, tgt)])
    h.step(gid, t + 10, [current(gid, "m1", 1, o(0, 1), pending=o(2, 3)), current(gid, "m2", 2, [])])
    h.step(gid, t + 300, [current(gid, "m1", 2, o(0, 1))])
    h.step(gid, t + 500, [current(gid, "m2", 2, o(2, 3))])
    out.append(Epoch(gid, 2, "member_joined", {"m1", "m2"}, named(tgt), t, reconciled=t + 500))

    t += 1000      # m2 also subscribes to events
    m2b = member("m2", ["orders", "events"], assignor="range")
    meta = {"orders": (ORDERS, 4), "events": (EVENTS, 2)}
    tgt = {"m1": o(0, 1), "m2": o(2, 3) + e(0, 1)}
    h.step(gid, t, [r.member_subscription_record(gid, m2b), r.subscription_metadata_record(gid, meta),
                    r.group_epoch_record(gid, 3), *target(gid, 3, tgt)])
    h.step(gid, t + 100, [current(gid, "m1", 3, o(0, 1)), current(gid, "m2", 3, o(2, 3) + e(0, 1))])
    out.append(Epoch(gid, 3, "subscription_changed", {"m1", "m2"}, named(tgt), t, reconciled=t + 100))

    t += 1000      # orders grows to 6 partitions; m2 never catches up before the next bump
    meta = {"orders": (ORDERS, 6), "events": (EVENTS, 2)}
    tgt = {"m1": o(0, 1, 4), "m2": o(2, 3, 5) + e(0, 1)}
    h.step(gid, t, [r.subscription_metadata_record(gid, meta), r.group_epoch_record(gid, 4), *target(gid, 4, tgt)])
    h.step(gid, t + 100, [current(gid, "m1", 4, o(0, 1, 4))])
    out.append(Epoch(gid, 4, "metadata_changed", {"m1", "m2"}, named(tgt), t))

    t += 1000      # m3 joins with a regex; its resolution comes later (epoch 6)
    m3 = member("m3", regex="ev.*")
    h.step(gid, t, [r.member_subscription_record(gid, m3), r.group_epoch_record(gid, 5)])
    out.append(Epoch(gid, 5, "member_joined", {"m1", "m2", "m3"}, None, t))

    t += 1000
    tgt = {"m1": o(0, 1, 4), "m2": o(2, 3, 5) + e(0), "m3": e(1)}
    h.step(gid, t, [regex_record(gid, "ev.*", ["events"], 1, t), r.group_epoch_record(gid, 6), *target(gid, 6, tgt)])
    out.append(Epoch(gid, 6, "regex_resolved", {"m1", "m2", "m3"}, named(tgt), t))

    t += 1000      # m1 goes (left, fenced or expired: the same tombstones)
    tgt = {"m2": o(0, 1, 2, 3, 4, 5) + e(0), "m3": e(1)}
    h.step(gid, t, [*r.member_removal(gid, "m1"), r.group_epoch_record(gid, 7), *target(gid, 7, tgt)])
    out.append(Epoch(gid, 7, "member_removed", {"m2", "m3"}, named(tgt), t))

    gid, t = "cg-deleted", T0 + 500      # one member, gone, then the group is deleted
    h.step(gid, t, [r.member_subscription_record(gid, member("solo", ["orders"])),
                    r.subscription_metadata_record(gid, meta4), r.group_epoch_record(gid, 1),
                    *target(gid, 1, {"solo": o(0, 1, 2, 3)}), current(gid, "solo", 1, o(0, 1, 2, 3))])
    out.append(Epoch(gid, 1, "member_joined", {"solo"}, named({"solo": o(0, 1, 2, 3)}), t, reconciled=t))
    h.step(gid, t + 2000, [*r.member_removal(gid, "solo"), r.group_epoch_record(gid, 2), *target(gid, 2, {})])
    out.append(Epoch(gid, 2, "member_removed", set(), {}, t + 2000, reconciled=t + 2000))
    h.step(gid, t + 3000, r.group_deletion(gid))

    gid, t = "cg-migrated", T0 + 700     # upgraded from a classic group: its first epoch has classic members
    h.step(gid, t, [classic_member_record(gid, "k1", ["orders"], 45000),
                    r.subscription_metadata_record(gid, meta4), r.group_epoch_record(gid, 5)])
    out.append(Epoch(gid, 5, "migration", {"k1"}, None, t))

    gid, t = "cg-hashed", T0 + 900       # Kafka 4.1: topic changes show as a new metadata hash only
    h.step(gid, t, [r.member_subscription_record(gid, member("h1", ["orders"])), epoch_with_hash(gid, 1, 111)])
    h.step(gid, t + 1000, [epoch_with_hash(gid, 2, 222)])
    out += [Epoch(gid, 1, "member_joined", {"h1"}, None, t), Epoch(gid, 2, "metadata_changed", {"h1"}, None, t + 1000)]
    return out


def deleted_groups():
    return {"cg-deleted"}
