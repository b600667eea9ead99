"""Load: process start to serving, with 10k / 100k / 1M live committed offsets in 10k groups.

The __consumer_offsets segments are written directly (kcoord.protocol.consumer_offsets records in
kcoord.protocol.records batches, Kafka's directory layout), then kcoord is started on a copy and
timed until OffsetFetch for a group on every offsets partition answers without
COORDINATOR_LOAD_IN_PROGRESS. Baseline, same run: the same start on an empty store (its 50
partitions present, with empty segments), alternating with the loaded starts.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections import defaultdict
from functools import partial
from pathlib import Path

from bench import loadgen_wire as w
from bench.loadgen_client import KafkaConn
from bench.loadgen_server import KcoordServer
from bench.runner import RESULTS, arun, interleaved, main, median, proc_cpu_seconds, ratio, settings

GROUPS = 10_000
TOPIC = "load-topic"
PARTITIONS = 50  # offsets.topic.num.partitions (Kafka's default)
POLL_S = 0.002  # between probe rounds: fine against a load of ~3 ms per partition at 10k offsets
BATCH = 1000  # records per batch, like a busy coordinator's group-committed writes
CACHE = RESULTS / ".cache"
# reps per size. This VM's CPU speed wanders by +-25% from one start to the next (the same empty
# start took 0.2-0.35 s of user CPU in a row), so the small sizes, cheap, get many
REPS = {10_000: 15, 100_000: 11, 1_000_000: 5}
QUICK_REPS = {10_000: 2, 100_000: 2}


def group_name(g: int) -> str:
    return f"load-group-{g}"


def _records_by_partition(offsets: int) -> dict[int, list[tuple[bytes, bytes]]]:
    from kcoord.protocol import consumer_offsets as co

    per_group = max(1, offsets // GROUPS)
    now = int(time.time() * 1000)
    out: dict[int, list] = defaultdict(list)
    for g in range(GROUPS):
        group = group_name(g)
        p = co.partition_for(group, PARTITIONS)
        meta = co.GroupMetadataValue(
            protocol_type="consumer", generation=1, protocol=None, leader=None, current_state_timestamp=now
        )
        out[p].append((co.encode_group_metadata_key(group), co.encode_group_metadata_value(meta)))
        for part in range(per_group):
            value = co.OffsetCommitValue(offset=1000 + part, commit_timestamp=now)
            out[p].append(
                (co.encode_offset_commit_key(group, TOPIC, part), co.encode_offset_commit_value(value))
            )
    return out


def generate(offsets: int) -> Path:
    """A store holding `offsets` live offsets (cached under bench/results/.cache: it is big).
    generate(0) is the baseline's store: every offsets partition there, and empty."""
    from kcoord.protocol.records import build_batch

    target = CACHE / f"load-{offsets}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    by_partition = _records_by_partition(offsets) if offsets else {p: [] for p in range(PARTITIONS)}
    for p, records in by_partition.items():
        d = target / f"__consumer_offsets-{p}"
        d.mkdir(parents=True)
        with open(d / f"{0:020d}.log", "wb") as f:
            for base in range(0, len(records), BATCH):
                f.write(build_batch(records[base : base + BATCH], base_offset=base))
    (target / ".complete").touch()
    return target


def probe_groups() -> tuple[str, ...]:
    """One generated group per offsets partition, in partition order (the order kcoord loads
    them in, so a probe round stops at the first partition still loading)."""
    from kcoord.protocol import consumer_offsets as co

    seen: dict[int, str] = {}
    for g in range(GROUPS):
        seen.setdefault(co.partition_for(group_name(g), PARTITIONS), group_name(g))
        if len(seen) == PARTITIONS:
            break
    return tuple(seen[p] for p in sorted(seen))


async def _offset_fetch(conn: KafkaConn, group: str) -> tuple[int, dict]:
    err, offsets, _ = w.parse_offset_fetch(
        await conn.call(w.OFFSET_FETCH, w.OFFSET_FETCH_V, w.offset_fetch(group, None))
    )
    return err, offsets


async def until_serving(server: KcoordServer, probes: tuple[str, ...], timeout: float) -> dict:
    """Poll until every probe group's OffsetFetch answers without an error; returns the wall
    seconds from spawn and the server's CPU seconds (all threads, ns) at the answer that
    completed the set, and the last answer's offsets.

    A partition, once loaded, stays loaded, so each round asks only the groups not yet answered
    and stops at the first still loading: the round that completes the set is one or two
    requests, answered as the last partition's load ends. That matters because right then the
    server starts writing checkpoints of what it loaded (kcoord.coordinator.runtime.checkpoints); a
    round of all 50 probes (what KcoordServer.wait_ready sends) would be answered meanwhile, and
    a varying share of that work would land in both figures."""
    end = time.monotonic() + timeout
    conn = None
    while conn is None:
        if server.proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError(f"kcoord never listened (exit code {server.proc.returncode})")
        try:
            conn = await KafkaConn.open(server.port)
        except OSError:
            await asyncio.sleep(POLL_S)
    port_open = time.monotonic() - server.started_at  # the port opens before the groups are loaded
    try:
        pending, err = list(probes), None
        while time.monotonic() < end:
            while pending:
                err, offsets = await _offset_fetch(conn, pending[0])
                if err != w.NONE:
                    break
                pending.pop(0)
            if not pending:
                at, cpu = time.monotonic(), proc_cpu_seconds(server.pid)
                return {"seconds": at - server.started_at, "cpu": cpu, "offsets": offsets, "port_open": port_open}
            await asyncio.sleep(POLL_S)
        raise TimeoutError(f"kcoord not serving after {timeout}s: {pending[0]} answers error {err}")
    finally:
        conn.close()


def start_time(store: Path | None, probes: tuple[str, ...], expect: int = 0) -> tuple[float, float]:
    """(wall seconds from spawn to serving, CPU seconds the server used by then — steadier on a
    shared machine); with `expect`, checks that the last probe group got its offsets back (a
    fast start that lost the data would be no result)."""
    ready = start_times(store, probes, expect)
    return ready["seconds"], ready["cpu"]


def start_times(store: Path | None, probes: tuple[str, ...], expect: int = 0) -> dict:
    """`start_time`'s figures and `port_open`: wall seconds from spawn until the port took a connection."""
    work = tempfile.mkdtemp(prefix="kcoord-bench-load-")
    data = os.path.join(work, "data")
    if store is None:
        os.mkdir(data)
    else:
        shutil.copytree(store, data, ignore=shutil.ignore_patterns(".complete"))
    try:
        with KcoordServer(data_dir=data) as server:
            ready = arun(until_serving(server, probes, timeout=300))
            if expect:
                want = {(TOPIC, p): 1000 + p for p in range(expect)}
                if ready["offsets"] != want:
                    raise AssertionError(f"{probes[-1]}: loaded {len(ready['offsets'])} offsets, expected {expect}")
            return ready
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(quick: bool = False) -> dict:
    reps_by_size = QUICK_REPS if quick else REPS
    probes = probe_groups()
    empty_store = generate(0)
    rows = []
    for n, reps in reps_by_size.items():
        t0 = time.monotonic()
        store = generate(n)
        gen_s = time.monotonic() - t0
        size_mb = sum(f.stat().st_size for f in store.rglob("*.log")) / 1e6
        expect = max(1, n // GROUPS)
        starts = interleaved(
            {"empty": partial(start_time, empty_store, probes), "loaded": partial(start_time, store, probes, expect)}, reps
        )
        empty, loaded = starts["empty"], starts["loaded"]
        e, s = median(r[0] for r in empty), median(r[0] for r in loaded)
        ecpu, scpu = median(r[1] for r in empty), median(r[1] for r in loaded)
        rows.append(
            {
                "offsets": n,
                "groups": GROUPS,
                "reps": reps,
                "store MB": size_mb,
                "start to serving s": s,
                "empty store s": e,
                "ratio": median(ratio(b[0], a[0]) for a, b in zip(empty, loaded, strict=True)),
                "load s (minus empty)": s - e,
                "offsets/s loaded": n / (s - e) if s > e else float("nan"),
                "cpu s to serve": scpu,
                "empty cpu s": ecpu,
                "cpu ratio": median(ratio(b[1], a[1]) for a, b in zip(empty, loaded, strict=True)),
                "max/min": max(r[0] for r in loaded) / min(r[0] for r in loaded),
                "generate s": gen_s,
            }
        )
    return {
        "name": "load",
        "settings": settings(
            reps=",".join(f"{n}:{r}" for n, r in reps_by_size.items()),
            offsets_partitions=PARTITIONS,
            records_per_batch=BATCH,
            probe=f"OffsetFetch v{w.OFFSET_FETCH_V}, one group per partition, every {POLL_S * 1000:g} ms",
        ),
        "rows": rows,
        "notes": [
            "start to serving: process spawn -> every offsets partition answers OffsetFetch without "
            "COORDINATOR_LOAD_IN_PROGRESS; includes interpreter start, like the baseline: the same start on a "
            "store with every offsets partition present and empty (so both open existing files; creating 50 "
            "partitions with their fsyncs is not in either). Seconds "
            "are medians over reps; ratio and cpu ratio are medians of the per-rep ratios (loaded / empty, "
            "started one after the other). cpu: the server's kernel CPU clock (ns, all threads) read at the "
            "answer that completed the probe set. Each probe round asks only the partitions not yet answered, "
            "so that answer comes as the last partition's load ends, before the checkpoints the server then "
            "writes in the background (a full probe round answered meanwhile counted a varying part of them)."
        ],
    }


if __name__ == "__main__":
    main(run)
