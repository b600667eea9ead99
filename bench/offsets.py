"""Durable offset commits: 100 concurrent committers, fsync on, against a durable-commit ceiling.

kcoord: the C generator drives 100 connections, each committing `PARTS` partitions of one
topic for its own group (OffsetCommit v8, generation -1: a simple consumer), one request in
flight, for a fixed time. A commit is answered only once durable, so offsets/s is durable
throughput. Baselines, same run, measured in turn with kcoord in every rep:
- the durable-commit ceiling (bench.offsets_ceiling): a uvloop server under the same generator that
  appends each committer's prebuilt records through storage and answers a fixed response once
  fsynced: sockets, loop, storage and fsyncs as kcoord has them, without the coordinator's work;
- the storage layer alone, in process: 100 asyncio writers doing append + fsync (group commit) of
  batches of the same records to the same partitions.
"""

from __future__ import annotations

import asyncio
import shutil
import struct
import tempfile
import time

from bench import ceiling, offsets_ceiling
from bench import loadgen_wire as w
from bench.loadgen_client import KafkaConn
from bench.loadgen_server import KcoordServer
from bench.runner import Deadline, arun, main, median, ratio, settings
from kcoord.protocol.consumer_offsets import OFFSETS_TOPIC

COMMITTERS = 100
TOPIC = "bench-commits"
OFFSETS_PARTITIONS = 50
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


def commit_records(group: str, parts: int) -> list[tuple[bytes, bytes]]:
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
    from kcoord.protocol.records import build_batch
    from kcoord.storage import LogManager

    tmp = tempfile.mkdtemp(prefix="kcoord-bench-storage-")
    mgr = LogManager(tmp)
    latencies: list[float] = []
    try:
        batches = []
        for i in range(COMMITTERS):
            log = mgr.get_or_create(OFFSETS_TOPIC, java_hash_partition(group_of(i)))
            batches.append((log, build_batch(commit_records(group_of(i), parts))))
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


def commit_frames(parts: int) -> list[bytes]:
    return [
        w.frame(
            w.OFFSET_COMMIT,
            w.OFFSET_COMMIT_V,
            0,
            w.offset_commit(group_of(i), -1, "", TOPIC, [(p, 1000 + p) for p in range(parts)]),
        )
        for i in range(COMMITTERS)
    ]


def measure(parts: int, seconds: float, reps: int) -> dict[str, dict]:
    """Each rep runs the raw storage baseline, the durable ceiling and kcoord in turn, so drift in the
    machine's speed hits all alike. Per what: medians over reps; ratios are medians of per-rep ratios."""
    runs: dict[str, list[dict]] = {"storage": [], "ceiling": [], "kcoord": []}
    with KcoordServer() as server, offsets_ceiling.DurableCeiling(parts) as ceil:
        arun(server.wait_ready())
        arun(_create_topic(server.port, parts))
        frames, err_at = commit_frames(parts), w.commit_err_offset(TOPIC)
        targets = [
            ceiling.Target(ceil.port, ceil.proc.pid, frames, COMMITTERS, err_at),
            ceiling.Target(server.port, server.pid, frames, COMMITTERS, err_at),
        ]
        for _ in range(reps):
            runs["storage"].append(arun(_storage_baseline(seconds, parts)))
            c, k = ceiling.compare(targets, seconds, 1)
            runs["ceiling"].append(c)
            runs["kcoord"].append(k)
    out = {}
    for what, rs in runs.items():
        m = {key: median(r[key] for r in rs) for key in ("rps", "p50_us", "p99_us")}
        m["vs storage"] = median(ratio(r["rps"], s["rps"]) for r, s in zip(rs, runs["storage"], strict=True))
        if what != "storage":
            m["server_cpu"] = median(r["server_cpu"] for r in rs)
            m["server_cpu_us"] = median(r["server_cpu_us"] for r in rs)
            m["errors"] = sum(r["errors"] for r in rs)
            m["spread"] = max(r["rps"] for r in rs) / min(r["rps"] for r in rs)
            # compare() ran the ceiling first in each rep: its ratios are to the ceiling of the same rep
            m["vs ceiling"] = median(r["ratio"] for r in rs)
            m["cpu ratio"] = median(r["cpu_ratio"] for r in rs)  # the ceiling's CPU per commit over this row's
        else:
            m["vs ceiling"] = median(ratio(r["rps"], c["rps"]) for r, c in zip(rs, runs["ceiling"], strict=True))
        out[what] = m
    return out


LABELS = {
    "storage": "raw storage append+fsync, in process",
    "ceiling": "uvloop durable-commit ceiling (baseline)",
    "kcoord": "kcoord OffsetCommit v8",
}


def run(quick: bool = False) -> dict:
    seconds = 1.5
    # reps per partitions/commit: the 50-partition rates follow the disk's fsync latency, which drifts
    # within a run; its median ratio took 9 reps to repeat (5 moved it +-17% once kcoord got faster)
    reps = {50: 2} if quick else {1: 5, 50: 9}
    rows = []
    for parts in reps:
        for what, m in measure(parts, seconds, reps[parts]).items():
            rows.append(
                {
                    "what": LABELS[what],
                    "partitions/commit": parts,
                    "commits/s": m["rps"],
                    "offsets/s": m["rps"] * parts,
                    "p50 ms": m["p50_us"] / 1000,
                    "p99 ms": m["p99_us"] / 1000,
                    "ratio": m["vs ceiling"],
                    "vs storage": m["vs storage"],
                    "target": f">= {TARGET:,} offsets/s" if parts > 1 and what == "kcoord" else "",
                    "server cpu": m.get("server_cpu", ""),
                    "cpu ratio": m.get("cpu ratio", ""),
                    "server cpu us/offset": m["server_cpu_us"] / parts if "server_cpu_us" in m else "",
                    "errors": m.get("errors", ""),
                    "max/min": m.get("spread", ""),
                }
            )
    return {
        "name": "offsets",
        "settings": settings(
            committers=COMMITTERS,
            seconds_per_rep=seconds,
            reps_by_partitions=reps,
            fsync="on",
            offsets_partitions=OFFSETS_PARTITIONS,
        ),
        "rows": rows,
        "notes": [
            "ratio = median over reps of a row's commits/s over the durable-commit ceiling's in the same rep "
            "(bench.offsets_ceiling: a uvloop server, driven by the same C generator, that appends each "
            "committer's prebuilt records through storage and answers a fixed response once fsynced: the same "
            "sockets, loop, storage and fsyncs as kcoord, none of the coordinator's work). 'vs storage' is the same "
            "against the storage layer alone, in process (no sockets). The three are measured in turn in every rep.",
            "cpu ratio = median over reps of the ceiling's server CPU per commit over this row's: the coordinator's "
            "CPU cost, which the durable rate follows once the server's thread is saturated; steadier than rates "
            "when other work shares the cores.",
            "errors = non-zero partition error codes + lost answers (must be 0).",
        ],
    }


if __name__ == "__main__":
    main(run)
