"""Storage benchmark.

Durable appends: small batches (one 100-byte record, the size of an offset commit) from N
concurrent asyncio tasks for a fixed time, each acknowledged only after an fsync covers it.
Baselines measured in the same run on the same disk: the same appenders each paying their own
fsync (no coalescing), and appends with no fsync at all (the upper bound).

Also: recovery on open (every batch CRC-checked, indexes compared) in MB/s, and decoding
records for bulk readers (kcoord.protocol.records.iter_key_values) against kafka-python's reader.

    /work/venv/bin/python -m bench.storage [--quick]
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time

from kcoord.protocol.records import build_batch
from kcoord.storage import LogConfig, PartitionLog

RECORD = b"x" * 100


async def _appender(log: PartitionLog, mode: str, stop_at: float, latencies: list[float]) -> int:
    loop = asyncio.get_running_loop()
    count = 0
    payload = build_batch([(b"key", RECORD)], timestamp_ms=1)
    while time.perf_counter() < stop_at:
        started = time.perf_counter()
        if mode == "group_commit":
            await log.append_durable(payload)
        elif mode == "fsync_per_append":
            log.append(payload)
            await loop.run_in_executor(None, os.fsync, log.active_segment.fd)
        else:  # no_fsync
            log.append(payload)
            await asyncio.sleep(0)
        latencies.append(time.perf_counter() - started)
        count += 1
    return count


async def _measure(mode: str, appenders: int, seconds: float) -> dict:
    directory = tempfile.mkdtemp(prefix="kcoord-bench-")
    try:
        config = LogConfig(flush_on_append=(mode == "group_commit"))
        log = PartitionLog(os.path.join(directory, "bench-0"), "bench", 0, config)
        latencies: list[float] = []
        started = time.perf_counter()
        counts = await asyncio.gather(*(_appender(log, mode, started + seconds, latencies)
                                        for _ in range(appenders)))
        elapsed = time.perf_counter() - started
        total = sum(counts)
        rounds = log.fsync_rounds if mode == "group_commit" else (total if mode == "fsync_per_append" else 0)
        log.close()
        latencies.sort()
        return {
            "mode": mode,
            "appenders": appenders,
            "batches": total,
            "batches_per_s": round(total / elapsed),
            "fsyncs": rounds,
            "batches_per_fsync": round(total / rounds, 1) if rounds else None,
            "p50_ms": round(latencies[len(latencies) // 2] * 1000, 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3),
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _measure_recovery(megabytes: int) -> dict:
    directory = tempfile.mkdtemp(prefix="kcoord-bench-")
    try:
        path = os.path.join(directory, "bench-0")
        log = PartitionLog(path, "bench", 0, LogConfig(segment_bytes=64 << 20, flush_on_append=False))
        payload = build_batch([(b"key%d" % i, RECORD * 10) for i in range(16)], timestamp_ms=1)
        while log.size_bytes < megabytes << 20:
            log.append(payload)
        size = log.size_bytes
        log.close()
        started = time.perf_counter()
        PartitionLog(path, "bench", 0, LogConfig(segment_bytes=64 << 20)).close()
        elapsed = time.perf_counter() - started
        return {"mode": "recovery_on_open", "bytes": size, "mb_per_s": round(size / elapsed / 1e6, 1)}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _measure_decode(batches: int) -> list[dict]:
    from kafka.record import MemoryRecords

    from kcoord.protocol.records import iter_key_values

    data = b"".join(build_batch([(b"group-topic-%d" % (i % 50), RECORD[:40]) for i in range(200)],
                                base_offset=n * 200, timestamp_ms=1) for n in range(batches))
    started = time.perf_counter()
    ours = sum(1 for _ in iter_key_values(data))
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    theirs = 0
    reader = MemoryRecords(data)
    while reader.has_next():
        theirs += sum(1 for _ in reader.next_batch())
    theirs_s = time.perf_counter() - started
    return [{"mode": "decode_iter_key_values", "records": ours, "records_per_s": round(ours / ours_s)},
            {"mode": "decode_kafka_python_baseline", "records": theirs, "records_per_s": round(theirs / theirs_s)}]


def _run_on_loop(coro, loop_name: str):
    if loop_name == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


def run(quick: bool = False) -> dict:
    seconds = 1.0 if quick else 3.0
    cases = [("group_commit", n) for n in (1, 10, 100)]
    cases += [("fsync_per_append", 100), ("no_fsync", 100)]
    rows = []
    for loop_name in ("uvloop", "asyncio"):  # the broker runs on uvloop
        for mode, n in cases:
            row = _run_on_loop(_measure(mode, n, seconds), loop_name)
            rows.append({"loop": loop_name, **row})
    rows.append(_measure_recovery(32 if quick else 256))
    rows.extend(_measure_decode(100 if quick else 500))
    return {
        "name": "storage: durable append throughput (group commit)",
        "settings": {"seconds_per_row": seconds, "record_bytes": len(RECORD), "records_per_batch": 1,
                     "tmpdir": tempfile.gettempdir(), "cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "rows": rows,
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
