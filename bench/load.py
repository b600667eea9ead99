"""Load: process start to serving, with 10k / 100k / 1M live committed offsets in 10k groups.

The __consumer_offsets segments are written directly (protocol.consumer_offsets records in
protocol.records batches, Kafka's directory layout), then kcoord is started on a copy and
timed until OffsetFetch for a group on every offsets partition answers without
COORDINATOR_LOAD_IN_PROGRESS. Baseline, same run: the same start on an empty store.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench import loadgen_wire as w
from bench.loadgen_client import KafkaConn
from bench.loadgen_server import KcoordServer
from bench.runner import RESULTS, arun, main, median, proc_cpu_seconds, ratio, settings

GROUPS = 10_000
TOPIC = "load-topic"
PARTITIONS = 50  # offsets.topic.num.partitions (Kafka's default)
BATCH = 1000  # records per batch, like a busy coordinator's group-committed writes
CACHE = RESULTS / ".cache"


def group_name(g: int) -> str:
    return f"load-group-{g}"


def _records_by_partition(offsets: int) -> dict[int, list[tuple[bytes, bytes]]]:
    from protocol import consumer_offsets as co

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
    """A store holding `offsets` live offsets (cached under bench/results/.cache: it is big)."""
    from protocol.records import build_batch

    target = CACHE / f"load-{offsets}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    for p, records in _records_by_partition(offsets).items():
        d = target / f"__consumer_offsets-{p}"
        d.mkdir(parents=True)
        with open(d / f"{0:020d}.log", "wb") as f:
            for base in range(0, len(records), BATCH):
                f.write(build_batch(records[base : base + BATCH], base_offset=base))
    (target / ".complete").touch()
    return target


def probe_groups() -> tuple[str, ...]:
    """One generated group per offsets partition, so readiness covers every partition."""
    from protocol import consumer_offsets as co

    seen: dict[int, str] = {}
    for g in range(GROUPS):
        seen.setdefault(co.partition_for(group_name(g), PARTITIONS), group_name(g))
        if len(seen) == PARTITIONS:
            break
    return tuple(seen.values())


async def _loaded_offsets(port: int, group: str) -> dict:
    conn = await KafkaConn.open(port)
    try:
        _, offsets, _ = w.parse_offset_fetch(
            await conn.call(w.OFFSET_FETCH, w.OFFSET_FETCH_V, w.offset_fetch(group, None))
        )
        return offsets
    finally:
        conn.close()


def start_time(store: Path | None, probes: tuple[str, ...], expect: int = 0) -> tuple[float, float]:
    """(wall seconds from spawn to serving, CPU seconds the server used by then — steadier on a
    shared machine); with `expect`, checks a probe group got its offsets back (a fast start that
    lost the data would be no result)."""
    work = tempfile.mkdtemp(prefix="kcoord-bench-load-")
    data = os.path.join(work, "data")
    if store is None:
        os.mkdir(data)
    else:
        shutil.copytree(store, data, ignore=shutil.ignore_patterns(".complete"))
    try:
        with KcoordServer(data_dir=data) as server:
            seconds = arun(server.wait_ready(timeout=300, probe_groups=probes, fetch=True))
            cpu = proc_cpu_seconds(server.pid)
            if expect:
                got = arun(_loaded_offsets(server.port, probes[-1]))
                want = {(TOPIC, p): 1000 + p for p in range(expect)}
                if got != want:
                    raise AssertionError(f"{probes[-1]}: loaded {len(got)} offsets, expected {expect}")
            return seconds, cpu
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(quick: bool = False) -> dict:
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    reps = 2 if quick else 3
    probes = probe_groups()
    rows = []
    for n in sizes:
        t0 = time.monotonic()
        store = generate(n)
        gen_s = time.monotonic() - t0
        size_mb = sum(f.stat().st_size for f in store.rglob("*.log")) / 1e6
        empty, loaded = [], []
        for _ in range(reps):  # interleaved, so drift in machine load hits both alike
            empty.append(start_time(None, probes))
            loaded.append(start_time(store, probes, expect=max(1, n // GROUPS)))
        e, s = median(r[0] for r in empty), median(r[0] for r in loaded)
        ecpu, scpu = median(r[1] for r in empty), median(r[1] for r in loaded)
        rows.append(
            {
                "offsets": n,
                "groups": GROUPS,
                "store MB": size_mb,
                "start to serving s": s,
                "empty store s": e,
                "ratio": ratio(s, e),
                "load s (minus empty)": s - e,
                "offsets/s loaded": n / (s - e) if s > e else float("nan"),
                "cpu s to serve": scpu,
                "empty cpu s": ecpu,
                "cpu ratio": ratio(scpu, ecpu),
                "max/min": max(r[0] for r in loaded) / min(r[0] for r in loaded),
                "generate s": gen_s,
            }
        )
    return {
        "name": "load",
        "settings": settings(
            reps=reps,
            offsets_partitions=PARTITIONS,
            records_per_batch=BATCH,
            probe="OffsetFetch v7 on one group per partition",
        ),
        "rows": rows,
        "notes": [
            "start to serving: process spawn -> every offsets partition answers OffsetFetch without "
            "COORDINATOR_LOAD_IN_PROGRESS; includes interpreter start, like the empty-store baseline."
        ],
    }


if __name__ == "__main__":
    main(run)
