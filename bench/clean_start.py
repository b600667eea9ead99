"""Clean start: process start to the port accepting connections, after a clean shutdown and after a SIGKILL.

The store: bench.load's generator (N live offsets in 10k groups over the 50 `__consumer_offsets`
partitions) plus data topics (DATA_TOPICS x DATA_PARTITIONS partitions of DATA_MB each, in 16 KiB
producer batches, 8 MiB segments). Prepared once per run from the cached store:

* clean — the real server started on it (a first start: every segment recovered, indexes built), then
  stopped with SIGTERM: `.kafka_cleanshutdown` and `recovery-point-offset-checkpoint` written;
* crash — a copy of clean, started (the marker is deleted at start, the recovery points rewritten)
  and SIGKILLed once serving: the next start recovers each log from its recovery point on (Kafka's
  LogLoader.recoverLog), i.e. the segment holding the log end;
* crash, no checkpoint — crash without its recovery-point checkpoint: every segment recovered, what
  every start did before the clean-shutdown marker existed.

Then REPS rounds, in turn and in alternating order, each start on a fresh copy: wall seconds from
spawn to the first accepted TCP connection (the port opening), and the same on an empty store (the
baseline: interpreter start, imports, the 50 offsets partitions present and empty, as bench.load's,
after a clean shutdown too). Ratios are medians of the per-round
ratios against that round's empty start; the server's CPU seconds by then too (steadier on a shared
machine). Also in process, the same rounds: `LogManager(log.dirs)` alone (storage's open), on copies
of each store: the part of a start that the marker and the recovery points remove.

    python -m bench.clean_start [--quick]
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path

from bench import load as store_bench
from bench.loadgen_server import KcoordServer
from bench.runner import arun, main, median, proc_cpu_seconds, ratio, settings

OFFSETS = 1_000_000
QUICK_OFFSETS = 100_000
DATA_TOPICS, DATA_PARTITIONS, DATA_MB = 4, 2, 32
SEGMENT_BYTES = 8 << 20
BATCH_RECORDS, RECORD_BYTES = 16, 1000  # ~16 KiB batches, as a producer's batch.size
REPS, QUICK_REPS = 7, 2
POLL_S = 0.002
MARKER, RECOVERY_POINTS = ".kafka_cleanshutdown", "recovery-point-offset-checkpoint"
STORES = ("empty", "clean", "crash", "crash, no checkpoint")


def _data_topics(target: Path) -> None:
    from kcoord.protocol.records import build_batch
    from kcoord.storage import LogConfig, PartitionLog

    payload = os.urandom(RECORD_BYTES)
    for t in range(DATA_TOPICS):
        for p in range(DATA_PARTITIONS):
            log = PartitionLog(str(target / f"data-{t}-{p}"), f"data-{t}", p,
                               LogConfig(segment_bytes=SEGMENT_BYTES, flush_on_append=False))
            batch = build_batch([(b"key-%d" % i, payload) for i in range(BATCH_RECORDS)])
            for _ in range(DATA_MB * (1 << 20) // len(batch)):
                log.append(batch)
            log.close()


def generate(offsets: int) -> Path:
    """The offsets store plus the data topics (cached, as bench.load's)."""
    target = store_bench.CACHE / f"clean-start-{offsets}-{DATA_TOPICS}x{DATA_PARTITIONS}x{DATA_MB}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(store_bench.generate(offsets), target, ignore=shutil.ignore_patterns(".complete"))
    _data_topics(target)
    (target / ".complete").touch()
    return target


def _copy(store: Path, work: Path, name: str) -> Path:
    data = work / name
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(store, data, ignore=shutil.ignore_patterns(".complete"))
    return data


async def _until_port(server: KcoordServer, timeout: float = 600) -> tuple[float, float]:
    """(wall seconds from spawn, the server's CPU seconds) at the first accepted connection."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.proc.poll() is not None:
            raise RuntimeError(f"kcoord exited with {server.proc.returncode}; see {server.log_path}")
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
            return time.monotonic() - server.started_at, proc_cpu_seconds(server.pid)
        except OSError:
            await asyncio.sleep(POLL_S)
    raise TimeoutError(f"port {server.port} not open after {timeout}s")


def _cleanly_stopped(store: Path, work: Path, name: str) -> Path:
    """A copy of `store` after one start of the real server and a SIGTERM."""
    data = _copy(store, work, name)
    with KcoordServer(data_dir=str(data)) as server:
        arun(server.wait_ready(timeout=600))
    if not (data / MARKER).exists():
        raise RuntimeError(f"no clean-shutdown marker after SIGTERM; see {server.log_path}")
    return data


def _prepare(store: Path, work: Path) -> dict[str, Path]:
    """The stores of the module docstring."""
    clean = _cleanly_stopped(store, work, "clean")
    crash = _copy(clean, work, "crash")
    server = KcoordServer(data_dir=str(crash))
    try:
        arun(server.wait_ready(timeout=600))
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(timeout=30)
    finally:
        server.close()
    if (crash / MARKER).exists() or not (crash / RECOVERY_POINTS).exists():
        raise RuntimeError("the crash store should have recovery points and no marker")
    bare = _copy(crash, work, "bare")
    (bare / RECOVERY_POINTS).unlink()
    # The baseline: bench.load's empty store (every offsets partition there and empty: creating 50
    # partitions, with their fsyncs, is in neither side), stopped cleanly too.
    empty = _cleanly_stopped(store_bench.generate(0), work, "empty")
    return {"empty": empty, "clean": clean, "crash": crash, "crash, no checkpoint": bare}


def _port_time(store: Path, work: Path) -> tuple[float, float]:
    data = _copy(store, work, "run")
    try:
        with KcoordServer(data_dir=str(data)) as server:
            return arun(_until_port(server))
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _open_time(store: Path, work: Path) -> tuple[float, int]:
    """Seconds to open the store's LogManager in process, and how many segments it recovered."""
    from kcoord.storage import LogManager

    data = _copy(store, work, "open")
    try:
        started = time.perf_counter()
        mgr = LogManager(str(data))
        elapsed = time.perf_counter() - started
        recovered = sum(lg.loaded_recovered for lg in mgr.logs())
        asyncio.run(mgr.close())
        return elapsed, recovered
    finally:
        shutil.rmtree(data, ignore_errors=True)


def run(quick: bool = False) -> dict:
    offsets, reps = (QUICK_OFFSETS, QUICK_REPS) if quick else (OFFSETS, REPS)
    store = generate(offsets)
    work = Path(tempfile.mkdtemp(prefix="kcoord-bench-clean-start-"))
    try:
        stores = _prepare(store, work)
        ports: dict[str, list[tuple[float, float]]] = {name: [] for name in STORES}
        opens: dict[str, list[tuple[float, int]]] = {name: [] for name in STORES}
        for i in range(reps):
            for name in STORES if i % 2 == 0 else STORES[::-1]:
                ports[name].append(_port_time(stores[name], work))
                opens[name].append(_open_time(stores[name], work))
        size = sum(f.stat().st_size for f in store.rglob("*.log"))
        rows = []
        for name in STORES:
            walls, cpus = [w for w, _ in ports[name]], [c for _, c in ports[name]]
            rows.append({
                "store": name,
                "start to port s": median(walls),
                "port / empty": median(ratio(v[0], e[0]) for v, e in zip(ports[name], ports["empty"], strict=True)),
                "cpu to port s": median(cpus),
                "cpu / empty": median(ratio(v[1], e[1]) for v, e in zip(ports[name], ports["empty"], strict=True)),
                "storage open s": median(t for t, _ in opens[name]),
                "open / clean open": median(ratio(v[0], c[0]) for v, c in zip(opens[name], opens["clean"],
                                                                            strict=True)),
                "segments recovered": opens[name][-1][1],
                "max/min port s": max(walls) / min(walls),
            })
        return {
            "name": "clean_start",
            "settings": settings(reps=reps, live_offsets=offsets, store_mb=round(size / 1e6, 1),
                                 data=f"{DATA_TOPICS}x{DATA_PARTITIONS} partitions x {DATA_MB} MB, "
                                      f"{SEGMENT_BYTES >> 20} MiB segments",
                                 probe=f"TCP connect every {POLL_S * 1000:g} ms"),
            "rows": rows,
            "notes": [
                "start to port: spawn -> first accepted TCP connection, median of reps; cpu: the server's CPU "
                "clock (all threads) read then (steadier than wall time on a shared machine); x / empty: median "
                "of the per-round ratios to the empty store's start of the same round (interpreter, imports).",
                "storage open: LogManager(log.dirs) in process on a copy (page cache warm for all), median; "
                "segments recovered: CRC-scanned rather than opened from their indexes.",
                "The port opens once storage is open and the group runtime has started (its partitions load "
                "in the background), so start to port is interpreter start, imports, storage open and setup.",
            ],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(run)
