"""A consumer-group history written as a kcoord store would hold it, and the truth to check against.

The scenario drives groups through joins, leaves, a killed member and commits while a producer
writes to the consumed topic; it records what it did (commits, generations, causes, produced batches)
so tests can compute expected tables directly.
"""
from dataclasses import dataclass, field

from tests.analytics import storegen as g

T0 = 1_700_000_000_000
N_OFFSETS_PARTITIONS = 4


def java_hash(s):
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group):
    h = java_hash(group)
    return 0 if h == -(1 << 31) else abs(h) % N_OFFSETS_PARTITIONS


@dataclass
class Generation:
    group: str
    generation: int
    members: dict                     # member_id -> {topic: [partitions]}
    timestamp: int
    cause: str | None
    log_offset: int = -1


@dataclass
class Store:
    root: str
    commits: list = field(default_factory=list)       # (group, topic, partition, offset, commit_ts)
    aborted: list = field(default_factory=list)
    generations: list = field(default_factory=list)
    produced: dict = field(default_factory=dict)      # (topic, partition) -> [(max_ts, log_end_offset)]
    writers: dict = field(default_factory=dict)

    def writer(self, topic, partition):
        key = (topic, partition)
        if key not in self.writers:
            self.writers[key] = g.PartitionWriter(self.root, topic, partition)
        return self.writers[key]

    def produce(self, topic, partition, ts, n):
        w = self.writer(topic, partition)
        w.append([(ts, None, b"payload-%d" % i, None) for i in range(n)], compression=1)
        self.produced.setdefault((topic, partition), []).append((ts, w.next_offset))

    def commit(self, group, ts, offsets, txn=None):
        """offsets: {(topic, partition): offset}. txn: (producer_id, commit?) for a transactional commit."""
        w = self.writer(g.OFFSETS, offsets_partition(group))
        recs = [(ts, g.offset_commit_key(group, t, p), g.offset_commit_value(o, ts), None)
                for (t, p), o in offsets.items()]
        rows = [(group, t, p, o, ts) for (t, p), o in offsets.items()]
        if txn is None:
            w.append(recs)
            self.commits += rows
            return
        pid, ok = txn
        w.append(recs, transactional=True, producer_id=pid)
        w.append_marker(pid, ts + 1, commit=ok)
        (self.commits if ok else self.aborted).extend(rows)

    def complete_generation(self, group, generation, members, ts, cause=None, start_ms=None, join_ms=0,
                            sync_ms=0, trigger="", leader=None):
        """members: {member_id: {topic: [partitions]}}; cause None writes no headers (like Kafka)."""
        headers = None
        if cause is not None:
            headers = [(k, str(v).encode()) for k, v in (
                ("kcoord.rebalance.cause", cause), ("kcoord.rebalance.reason", f"test: {cause}"),
                ("kcoord.rebalance.trigger_member", trigger), ("kcoord.rebalance.start_ms", start_ms),
                ("kcoord.rebalance.join_ms", join_ms), ("kcoord.rebalance.sync_ms", sync_ms))]
        ms = [{"member_id": m, "client_id": f"client-{m}", "host": f"/10.0.0.{i + 1}",
               "topics": sorted(a), "assignment": a} for i, (m, a) in enumerate(sorted(members.items()))]
        leader = leader or (min(members) if members else None)
        value = g.group_metadata_value(generation, "range" if members else None, leader, ts, ms)
        w = self.writer(g.OFFSETS, offsets_partition(group))
        off = w.append([(ts, g.group_metadata_key(group), value, headers)])
        self.generations.append(Generation(group, generation, members, ts, cause, off))


def build(root) -> Store:
    """Two groups on topic `orders` (4 partitions): `payments` (kcoord headers) and `legacy` (none)."""
    s = Store(root)
    parts = [("orders", p) for p in range(4)]
    produced = dict.fromkeys(parts, 0)

    def produce_all(ts, n):
        for tp in parts:
            s.produce(*tp, ts, n + tp[1])
            produced[tp] += n + tp[1]

    # payments: a joins, b joins, c joins, b is killed (session timeout), c leaves, a leaves.
    gens = [
        (1, {"a": {"orders": [0, 1, 2, 3]}}, "initial_join", "a", 3000, 40),
        (2, {"a": {"orders": [0, 1]}, "b": {"orders": [2, 3]}}, "member_joined", "b", 1500, 30),
        (3, {"a": {"orders": [0]}, "b": {"orders": [1, 2]}, "c": {"orders": [3]}}, "member_joined", "c", 900, 20),
        (4, {"a": {"orders": [0, 1]}, "c": {"orders": [2, 3]}}, "session_timeout", "b", 45000, 25),
        (5, {"a": {"orders": [0, 1, 2, 3]}}, "member_left", "c", 300, 10),
    ]
    t = T0
    consumed = dict.fromkeys(parts, 0)
    for gen, members, cause, trigger, join_ms, sync_ms in gens:
        start = t + 1000
        t = start + join_ms + sync_ms
        s.complete_generation("payments", gen, members, t, cause, start, join_ms, sync_ms, trigger)
        for _ in range(4):                      # each member commits what it consumed every 5 s
            t += 5000
            produce_all(t - 2500, 10)
            for _member, assignment in sorted(members.items()):
                tps = [("orders", p) for p in assignment["orders"]]
                for tp in tps:
                    consumed[tp] = min(produced[tp], consumed[tp] + 12)
                s.commit("payments", t, {tp: consumed[tp] for tp in tps})
    t += 1000
    s.complete_generation("payments", 6, {}, t, "member_left", t - 50, 50, 0, "a")

    # A transactional commit that is aborted must not appear; a committed one must.
    s.commit("payments", t + 10, {("orders", 0): 1}, txn=(4242, False))
    s.commit("payments", t + 20, {("orders", 0): consumed[("orders", 0)]}, txn=(4343, True))

    # legacy: a real Kafka store, no headers. x joins, y joins, x leaves.
    lt = T0 + 500
    for gen, members in enumerate([{"x": {"orders": [0, 1, 2, 3]}},
                                   {"x": {"orders": [0, 1]}, "y": {"orders": [2, 3]}},
                                   {"y": {"orders": [0, 1, 2, 3]}}], start=1):
        s.complete_generation("legacy", gen, members, lt)
        lt += 7000
        s.commit("legacy", lt, {("orders", p): 5 * gen for p in range(4)})
        lt += 7000
    return s


EXPECTED_LEGACY_CAUSES = {1: "initial_join", 2: "member_joined", 3: "member_left"}
