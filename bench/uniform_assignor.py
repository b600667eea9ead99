"""The uniform assignor's time against group size, in process: members x partitions from 10 x 100 up to
1,000 x 10,000 (ten partitions a member, one topic).

Per size, medians over reps of:
- "from nothing": every partition unassigned (a new group's first target, in full);
- "+1 member, full": one member joins a balanced group, computed from scratch (nothing remembered, as
  after a restart): the rule's whole cost, O(p log m + m log m);
- "+1 member, incremental": the same join as the coordinator computes it (the assignor remembers the
  group's last target): O(partitions moved + m) of which the m part runs in C;
- "two subscriptions": half the members on the topic, half on it and a second topic of the same size
  (the heterogeneous path), from nothing.
Growth, measured in this run: each column's time / (n log2 n) (n = partitions) relative to the smallest
size -- at or below 1 means growing no worse than n log n -- and the fitted exponent k of time ~ n^k over
all sizes (n log n over this range fits k ~ 1.1; n^2 fits 2).
"""
from __future__ import annotations

import math
import time
import uuid

from bench.runner import fit_slope, main, median, settings
from coordinator.consumer.assignors import AssignmentMemberSpec
from coordinator.consumer.assignors.uniform import UniformAssignor

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
PER_MEMBER = 10
COLUMNS = ("from nothing", "+1 member, full", "+1 member, incremental", "two subscriptions")


def _specs(members: int, two: bool = False) -> dict:
    one = AssignmentMemberSpec(None, None, frozenset({T1}))
    both = AssignmentMemberSpec(None, None, frozenset({T1, T2}))
    return {f"member-{i:05d}": both if two and i % 2 else one for i in range(members)}


def _timed(assignor: UniformAssignor, members: dict, topics: dict, current: dict) -> float:
    t0 = time.perf_counter()
    assignor.assign(members, topics, current)
    return time.perf_counter() - t0


def measure(members: int, reps: int) -> dict:
    partitions = members * PER_MEMBER
    topics = {T1: partitions}
    specs, more = _specs(members), _specs(members)
    more["member-joining"] = AssignmentMemberSpec(None, None, frozenset({T1}))
    two = _specs(members, two=True)
    balanced = UniformAssignor().assign(specs, topics, {})
    times: dict[str, list[float]] = {c: [] for c in COLUMNS}
    for _ in range(reps):
        times["from nothing"].append(_timed(UniformAssignor(), specs, topics, {}))
        times["+1 member, full"].append(_timed(UniformAssignor(), more, topics, balanced))
        remembering = UniformAssignor()
        remembering.assign(specs, topics, {})  # it now remembers this group's target
        times["+1 member, incremental"].append(_timed(remembering, more, topics, balanced))
        times["two subscriptions"].append(_timed(UniformAssignor(), two, {T1: partitions, T2: partitions}, {}))
    return {"members": members, "partitions": partitions, **{f"{c} ms": median(v) * 1000 for c, v in times.items()}}


def run(quick: bool = False) -> dict:
    sizes = [10, 30, 100] if quick else [10, 30, 100, 300, 1000]
    reps = 3 if quick else 7
    rows = [measure(m, reps) for m in sizes]
    nlogn = [r["partitions"] * math.log2(r["partitions"]) for r in rows]
    for c in COLUMNS:
        base = rows[0][f"{c} ms"] / nlogn[0]
        for row, x in zip(rows, nlogn, strict=True):
            row[f"{c}: per n log n vs smallest"] = round(row[f"{c} ms"] / x / base, 2)
    logs = [math.log(r["partitions"]) for r in rows]
    exponents = {"members": "exponent k (time ~ n^k)"}
    for c in COLUMNS:
        exponents[f"{c} ms"] = round(fit_slope(logs, [math.log(r[f"{c} ms"]) for r in rows]), 2)
    reference = round(fit_slope(logs, [math.log(x) for x in nlogn]), 2)
    return {"name": "uniform_assignor", "settings": settings(partitions_per_member=PER_MEMBER, reps=reps),
            "rows": rows + [exponents],
            "notes": [f"n log n itself over these sizes fits k = {reference}; n^2 fits 2."]}


if __name__ == "__main__":
    main(run)
