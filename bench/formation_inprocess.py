"""The coordinator's own work in a group formation, in process: no sockets, no disk, no event loop.

KIP-848: n members send ConsumerGroupHeartbeat epoch 0 to a group on one n-partition topic; as on the
server, the first is written alone and the others queue behind it, so they are computed in batches (of up
to 256) once each write completes; each member acknowledges an assignment at once (as the Java client and
librdkafka do), and then every member heartbeats, round after round, until the group is Stable. Baseline,
same run: the classic formation of n members (JoinGroup twice, SyncGroup from the leader with the
assignment, then from the others, a Heartbeat each) on the same test context. Reps alternate the two.

`bench.consumer_group_formation` measures the same over TCP; this one isolates the coordinator (what the
server spends outside the kernel and the event loop). With KCOORD_BENCH_INSTRUCTIONS=1 and valgrind
installed it also counts the instructions of one KIP-848 formation (callgrind: a run of two formations
minus a run of one), a number that, unlike time, a busy machine does not move.
"""
from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import time

from bench.runner import ROOT, main, median, ratio, settings
from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.coordinator.testing import CoordinatorContext, RecordingWriter

INSTRUCTIONS_ENV = "KCOORD_BENCH_INSTRUCTIONS"


def _writer(ctx) -> RecordingWriter:
    return next(v for v in vars(ctx).values() if isinstance(v, RecordingWriter))


def consumer_formation(n: int) -> int:
    """One KIP-848 formation of n members on n partitions; returns the rounds of heartbeats it took."""
    ctx = ConsumerGroupContext({"formation": n}, consumer_group_session_timeout_ms=600_000)
    writer = _writer(ctx)
    writer.auto = False  # appends complete when drained: what queues meanwhile is computed as one batch
    ids, epochs, owned, sent = [""] * n, [0] * n, [{}] * n, [None] * n
    acks: list[int] = []

    def send(k: int) -> None:
        report = owned[k] if owned[k] != sent[k] else None

        def answered(result, k=k, report=report) -> None:
            if result.error:
                raise RuntimeError(f"member {k}: {result.error.name} {result.message}")
            if report is not None:
                sent[k] = report
            ids[k], epochs[k] = result.member_id, result.member_epoch
            if result.assignment is not None and result.assignment != owned[k]:
                owned[k] = result.assignment
                acks.append(k)

        if epochs[k] == 0:
            ctx.heartbeat("g", ids[k], 0, topics=["formation"], callback=answered)
        else:
            ctx.heartbeat("g", ids[k], epochs[k], owned=report, callback=answered)

    def drain() -> None:
        while writer.pending() or acks:
            while acks:
                send(acks.pop(0))
            writer.complete_all()

    for k in range(n):
        send(k)
    drain()
    rounds = 0
    while ctx.consumer_group("g").state != "Stable":
        rounds += 1
        if rounds > 50:
            raise RuntimeError("not Stable after 50 rounds")
        for k in range(n):
            send(k)
        drain()
    return rounds


def classic_formation(n: int) -> None:
    ctx = CoordinatorContext(group_initial_rebalance_delay_ms=0)
    joins = []
    for i in range(n):
        first = ctx.join("g", client_id=f"c{i}")
        joins.append(ctx.join("g", first.result.member_id, client_id=f"c{i}"))
    ctx.sleep(1)
    results = [j.result for j in joins]
    leader, members = results[0].leader_id, [r.member_id for r in results]
    ctx.sync("g", leader, 1, {m: b"a" for m in members})
    for m in members:
        if m != leader:
            ctx.sync("g", m, 1)
    for m in members:
        ctx.heartbeat("g", m, 1)


def _timed(form, n: int) -> float:
    gc.collect()
    t0 = time.perf_counter()
    form(n)
    return time.perf_counter() - t0


def instructions(n: int) -> int | None:
    """Instructions of one KIP-848 formation (callgrind), or None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    counts = []
    for reps in (1, 2):
        code = (f"import gc; gc.set_threshold(50_000, 10, 10); from bench.formation_inprocess import "
                f"consumer_formation as f; [f({n}) for _ in range({reps})]")
        out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                              "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": "0"})
        counts.append(next(int(line.split()[-1]) for line in out.stderr.splitlines() if "Collected" in line))
    return counts[1] - counts[0]


def measure(n: int, reps: int) -> dict:
    gc.set_threshold(50_000, 10, 10)  # the server's (broker/app.py)
    consumer_formation(n)  # warm up both
    classic_formation(n)
    kip848, classic = [], []
    for _ in range(reps):
        kip848.append(_timed(consumer_formation, n))
        classic.append(_timed(classic_formation, n))
    row = {"members": n, "KIP-848 s": round(median(kip848), 3), "classic s (baseline)": round(median(classic), 3),
           "ratio": round(median(ratio(a, b) for a, b in zip(kip848, classic, strict=True)), 2),
           "KIP-848 s per rep": " ".join(f"{x:.3f}" for x in kip848)}
    if os.environ.get(INSTRUCTIONS_ENV):
        count = instructions(n)
        row["KIP-848 instructions (M)"] = "no valgrind" if count is None else round(count / 1e6)
    return row


def run(quick: bool = False) -> dict:
    plan = [(100, 3)] if quick else [(100, 9), (1000, 7)]
    return {"name": "formation_inprocess", "settings": settings(partitions="= members", batch=256),
            "rows": [measure(n, reps) for n, reps in plan]}


if __name__ == "__main__":
    main(run)
