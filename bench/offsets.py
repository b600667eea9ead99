"""Durable offset commits: 100 concurrent committers, fsync on, against raw storage.

kcoord: the C generator drives 100 connections, each committing `PARTS` partitions of one
topic for its own group (OffsetCommit v8, generation -1: a simple consumer), one request in
flight, for a fixed time. A commit is answered only once durable, so offsets/s is durable
throughput. Baseline, same run: the storage layer alone — 100 asyncio writers doing
append + fsync (group commit) of batches of the same records to the same partitions.
"""

from __future__ import annotations

import asyncio
import shutil
import struct
import tempfile
import time

from bench import ceiling
from bench import loadgen_wire as w
from bench.loadgen_client import KafkaConn
from bench.loadgen_server import KcoordServer
from bench.runner import Deadline, arun, main, median, ratio, settings

COMMITTERS = 100
TOPIC = "bench-commits"
OFFSETS_TOPIC, OFFSETS_PARTITIONS = "__consumer_offsets", 50
TARGET = 100_000  # partition offsets/s


def group_of(i: int) -> str:
    return f"commit-{i}"


def java_hash_partition(group: str, n: int = OFFSETS_PARTITIONS) -> int:
    """Kafka's abs(String.hashCode) % n, so the baseline writes the partitions kcoord writes."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % n


def _commit_records(group: str, parts: int) -> list[tuple[bytes, bytes]]:
    """OffsetCommitKey v1 / OffsetCommitValue v3 shaped records (same bytes a coordinator writes)."""

    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()

    now = int(time.time() * 1000)
    return [
        (
            struct.pack(">h", 1) + s(group) + s(TOPIC) + struct.pack(">i", p),
            struct.pack(">hqi", 3, 1000 + p, -1) + s("") + struct.pack(">q", now),
        )
        for p in range(parts)
    ]


async def _storage_baseline(seconds: float, parts: int) -> dict:
    from protocol.records import build_batch
    from storage import LogManager

    tmp = tempfile.mkdtemp(prefix="kcoord-bench-storage-")
    mgr = LogManager(tmp)
    latencies: list[float] = []
    try:
        batches = []
        for i in range(COMMITTERS):
            log = mgr.get_or_create(OFFSETS_TOPIC, java_hash_partition(group_of(i)))
            batches.append((log, build_batch(_commit_records(group_of(i), parts))))
        warm = Deadline(0.5)
        deadline = Deadline(0.5 + seconds)

        async def writer(log, batch):
            while not deadline.expired():
                t0 = time.monotonic()
                await log.append_durable(batch)
                if not warm.expired():
                    continue
                latencies.append(time.monotonic() - t0)

        t0 = time.monotonic()
        await asyncio.gather(*(writer(log, b) for log, b in batches))
        elapsed = time.monotonic() - t0 - 0.5
    finally:
        await mgr.close()
        shutil.rmtree(tmp, ignore_errors=True)
    latencies.sort()
    n = len(latencies)
    return {
        "rps": n / elapsed,
        "p50_us": latencies[n // 2] * 1e6 if n else float("nan"),
        "p99_us": latencies[int(n * 0.99)] * 1e6 if n else float("nan"),
    }


async def _create_topic(port: int, parts: int) -> None:
    conn = await KafkaConn.open(port)
    try:
        await conn.call(w.CREATE_TOPICS, w.CREATE_TOPICS_V, w.create_topic(TOPIC, parts))
    finally:
        conn.close()


def _commit_frames(parts: int) -> list[bytes]:
    return [
        w.frame(
            w.OFFSET_COMMIT,
            w.OFFSET_COMMIT_V,
            0,
            w.offset_commit(group_of(i), -1, "", TOPIC, [(p, 1000 + p) for p in range(parts)]),
        )
        for i in range(COMMITTERS)
    ]


def measure(parts: int, seconds: float, reps: int) -> tuple[dict, dict]:
    """(storage baseline, kcoord), alternating rep by rep so machine load drift hits both."""
    base_runs, k_runs = [], []
    with KcoordServer() as server:
        arun(server.wait_ready())
        arun(_create_topic(server.port, parts))
        target = ceiling.Target(
            server.port, server.pid, _commit_frames(parts), COMMITTERS, w.commit_err_offset(TOPIC)
        )
        for _ in range(reps):
            base_runs.append(arun(_storage_baseline(seconds, parts)))
            k_runs.append(ceiling.compare([target], seconds, 1)[0])
    base = {key: median(r[key] for r in base_runs) for key in ("rps", "p50_us", "p99_us")}
    base["ratio"] = 1.0
    k = {key: median(r[key] for r in k_runs) for key in ("rps", "p50_us", "p99_us", "server_cpu")}
    k["errors"] = sum(r["errors"] for r in k_runs)
    k["ratio"] = median(ratio(r["rps"], b["rps"]) for r, b in zip(k_runs, base_runs, strict=True))
    k["spread"] = max(r["rps"] for r in k_runs) / min(r["rps"] for r in k_runs)
    return base, k


def run(quick: bool = False) -> dict:
    seconds, reps = (1.5, 2) if quick else (2.0, 3)
    part_counts = [50] if quick else [1, 50]
    rows = []
    for parts in part_counts:
        base, k = measure(parts, seconds, reps)
        for what, m in (("raw storage append+fsync (baseline)", base), ("kcoord OffsetCommit v8", k)):
            rows.append(
                {
                    "what": what,
                    "partitions/commit": parts,
                    "commits/s": m["rps"],
                    "offsets/s": m["rps"] * parts,
                    "p50 ms": m["p50_us"] / 1000,
                    "p99 ms": m["p99_us"] / 1000,
                    "ratio": m["ratio"],
                    "target": f">= {TARGET:,} offsets/s" if parts > 1 and m is k else "",
                    "server cpu": m.get("server_cpu", ""),
                    "server cpu us/offset": m["server_cpu"] / (m["rps"] * parts) * 1e6
                    if "server_cpu" in m
                    else "",
                    "errors": m.get("errors", ""),
                    "max/min": m.get("spread", ""),
                }
            )
    return {
        "name": "offsets",
        "settings": settings(
            committers=COMMITTERS,
            seconds_per_rep=seconds,
            reps=reps,
            fsync="on",
            offsets_partitions=OFFSETS_PARTITIONS,
        ),
        "rows": rows,
        "notes": [
            "ratio = median over reps of kcoord commits/s over raw storage appends/s of the same records, "
            "measured alternately in the same run. "
            "errors = non-zero partition error codes + lost answers (must be 0)."
        ],
    }


if __name__ == "__main__":
    main(run)
