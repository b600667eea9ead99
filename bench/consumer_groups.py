"""KIP-848 consumer groups, the coordinator's own cost (in process, no sockets: the deterministic
context with a writer that completes at once).

Per group size N: a steady ConsumerGroupHeartbeat (nothing changes: no records) and a join of one more
member (new subscription -> epoch bump -> target assignment over N+1 members -> records), each in µs.
Baseline, measured in the same run: a classic Heartbeat of a member of a Stable group of the same size.
The uniform assignor alone, against group size: bench/uniform_assignor.py.
"""
from __future__ import annotations

import time

from bench.runner import main, settings
from kcoord.coordinator.consumer.testing import ConsumerGroupContext

PARTITIONS = 64


def _per_op_us(fn, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - t0) / n * 1e6


def measure(members: int, ops: int) -> dict:
    ctx = ConsumerGroupContext(topics={"t": PARTITIONS})
    ids = []
    for i in range(members):
        ids.append(ctx.heartbeat("g", f"m{i}", 0, topics=["t"]).member_id)
    for _ in range(3):  # settle: everyone reconciled to the last epoch
        for mid in ids:
            member = ctx.consumer_group("g").members[mid]
            ctx.heartbeat("g", mid, member.member_epoch, owned=dict(member.assigned_partitions))
    epochs = {mid: ctx.consumer_group("g").members[mid].member_epoch for mid in ids}
    steady = _per_op_us(lambda i: ctx.heartbeat("g", ids[i % members], epochs[ids[i % members]]), ops)
    joins = max(1, ops // 20)
    join = _per_op_us(lambda i: ctx.heartbeat("g", f"late{i}", 0, topics=["t"]), joins)
    classic = ConsumerGroupContext()
    stable = classic.stable_group("c", members)
    generation = classic.group("c").generation_id
    baseline = _per_op_us(lambda i: classic.heartbeat("c", stable[i % members], generation), ops)
    return {"members": members, "steady heartbeat us": round(steady, 1), "join us": round(join, 1),
            "classic heartbeat us (baseline)": round(baseline, 1), "steady/classic": round(steady / baseline, 2)}


def run(quick: bool = False) -> dict:
    sizes = [10, 100] if quick else [10, 100, 500]
    ops = 2000 if quick else 5000
    rows = [measure(n, ops) for n in sizes]
    return {"name": "consumer_groups", "settings": settings(partitions=PARTITIONS, ops=ops), "rows": rows}


if __name__ == "__main__":
    main(run)
