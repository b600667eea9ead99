"""The uniform assignor's time against group size, in process: members x partitions from 10 x 100 up to
1,000 x 10,000 (ten partitions a member, one topic).

Per size, medians over reps (each rep runs every size once, so the machine's drift hits all alike) of:
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
from kcoord.coordinator.consumer.assignors import AssignmentMemberSpec
from kcoord.coordinator.consumer.assignors.uniform import UniformAssignor

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


class Size:
    """One group size's inputs, built once."""

    def __init__(self, members: int) -> None:
        self.members, self.partitions = members, members * PER_MEMBER
        self.topics = {T1: self.partitions}
        self.specs, self.more = _specs(members), _specs(members)
        self.more["member-joining"] = AssignmentMemberSpec(None, None, frozenset({T1}))
        self.two = _specs(members, two=True)
        self.balanced = UniformAssignor().assign(self.specs, self.topics, {})
        self.times: dict[str, list[float]] = {c: [] for c in COLUMNS}

    def measure_once(self) -> None:
        t = self.times
        t["from nothing"].append(_timed(UniformAssignor(), self.specs, self.topics, {}))
        t["+1 member, full"].append(_timed(UniformAssignor(), self.more, self.topics, self.balanced))
        remembering = UniformAssignor()
        remembering.assign(self.specs, self.topics, {})  # it now remembers this group's target
        t["+1 member, incremental"].append(_timed(remembering, self.more, self.topics, self.balanced))
        t["two subscriptions"].append(
            _timed(UniformAssignor(), self.two, {T1: self.partitions, T2: self.partitions}, {}))

    def row(self) -> dict:
        return {"members": self.members, "partitions": self.partitions,
                **{f"{c} ms": median(v) * 1000 for c, v in self.times.items()}}


def run(quick: bool = False) -> dict:
    sizes = [Size(m) for m in ([10, 30, 100] if quick else [10, 30, 100, 300, 1000])]
    reps = 3 if quick else 9
    for _ in range(reps):  # every size once per rep: drift in the machine's speed hits all sizes alike
        for size in sizes:
            size.measure_once()
    rows = [size.row() for size in sizes]
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
