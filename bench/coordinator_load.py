"""Coordinator load: from `__consumer_offsets` segments on disk to served groups, in process.

The store is bench.load's (10k groups, N live OffsetCommit records over 50 partitions, batches
of 1000), so the numbers line up with its process-start-to-serving run. Per size, timed the way
GroupRuntime loads (storage read, batch decode, replay, groups built), `runs` rounds, each timing
decode, full replay and checkpoint + tail back to back (the order alternating between rounds):

* full replay — every partition's whole log;
* checkpoint + tail — each partition's checkpoint (written from the full replay), then a tail of
  TAIL commits appended after it, replayed through the same code; the result is checked to equal
  the full replay of the same log.

Baseline, in the same rounds: decoding the same segments (page cache; every batch cut into keys and
values by kcoord.protocol.record_kv, as replay does first) without applying anything, so a ratio says what
building the groups adds, and host speed moves both sides alike; each ratio is the median of the
rounds' ratios, each time the best of the rounds. Reading the bytes alone is shown too. Wall and
process CPU are both reported: the machine is shared, so wall time carries other processes' load.
With --e2e (or quick=False), also the process start to serving of the real server
(bench.load.start_time, median of `runs`, interleaved) on the store without checkpoints, with
them, and empty.
"""
from __future__ import annotations

import asyncio
import gc as garbage_collector
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import load as store_bench
from bench.runner import main, median, ratio, settings
from kcoord.coordinator import GroupConfig, GroupCoordinatorService, checkpoint_store
from kcoord.coordinator.gc_pause import gc_paused
from kcoord.coordinator.partition_state import PartitionState
from kcoord.coordinator.testing import ManualClock, RecordingWriter
from kcoord.protocol import consumer_offsets as co
from kcoord.protocol.record_kv import iter_log_key_values
from kcoord.protocol.records import build_batch
from kcoord.storage import LogManager

TOPIC = co.OFFSETS_TOPIC
TAIL = 10_000  # commits after the checkpoints: half an interval's worth per partition at most
RUNS = 5  # rounds at 1M offsets
E2E_RUNS = 3  # process starts per store
# Rounds per size: the small stores' steps take tens of ms, so more rounds for the same stability.
ROUNDS = {10_000: 15, 100_000: 9}
# Reading the segments' bytes (page cache) takes ~10 ms at 1M offsets: shown, the best of more runs (they
# cost little). It was the baseline: Python replay over a copy done in C moved +-16-17% between runs.
READ_RUNS = 15
log = logging.getLogger("bench.coordinator_load")


def _timed(fn):
    garbage_collector.unfreeze()  # what an earlier load froze, so that it can be freed
    garbage_collector.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def _read_bytes(data: Path) -> int:
    return sum(len(f.read_bytes()) for f in data.rglob("*.log"))


def _load(mgr: LogManager, partitions: int, use_checkpoints: bool) -> GroupCoordinatorService:
    """What GroupRuntime does per partition, minus the event loop."""
    clock = ManualClock()
    gc = GroupCoordinatorService(GroupConfig(offsets_topic_num_partitions=partitions), clock=clock,
                                 timer=clock.timers, writer=RecordingWriter(), log=log)
    now = int(time.time() * 1000)
    with gc_paused(freeze=True):  # as GroupRuntime._load_all
        for p in range(partitions):
            plog = mgr.get_or_create(TOPIC, p)
            loaded = checkpoint_store.load(plog, p, now, gc.load_partition, use_checkpoint=use_checkpoints)
            assert use_checkpoints == (loaded.written_ms is not None), "checkpoint refused"
    return gc


def _write_checkpoints(mgr: LogManager, partitions: int) -> int:
    size = 0
    for p in range(partitions):
        plog = mgr.get_or_create(TOPIC, p)
        state = PartitionState()
        records, end = checkpoint_store.read_tail(plog, plog.log_start_offset)
        state.replay(records, log)
        size += checkpoint_store.write(plog, p, state, end, int(time.time() * 1000))
    return size


def _refresh_checkpoints(mgr: LogManager, partitions: int) -> None:
    """What the runtime does for a partition whose tail reached the interval."""
    now = int(time.time() * 1000)
    for p in range(partitions):
        plog = mgr.get_or_create(TOPIC, p)
        state, offset = checkpoint_store.refreshed_state(plog, p, now, log)
        checkpoint_store.write(plog, p, state, offset, now)


def _append_tail(mgr: LogManager, n: int) -> None:
    """TAIL new commits of existing offsets (the live offset count stays n)."""
    per_group = max(1, n // store_bench.GROUPS)
    by_partition: dict[int, list] = {}
    now = int(time.time() * 1000)
    for i in range(TAIL):
        group = store_bench.group_name(i % min(store_bench.GROUPS, n))
        value = co.OffsetCommitValue(offset=5000 + i, commit_timestamp=now)
        by_partition.setdefault(co.partition_for(group, store_bench.PARTITIONS), []).append(
            (co.encode_offset_commit_key(group, store_bench.TOPIC, (i // store_bench.GROUPS) % per_group),
             co.encode_offset_commit_value(value)))
    for p, records in by_partition.items():
        plog = mgr.get_or_create(TOPIC, p)
        for start in range(0, len(records), 100):
            plog.append(build_batch(records[start:start + 100]))
        plog.flush()


def _offsets(gc: GroupCoordinatorService) -> dict:
    return {gid: offsets for shard in gc.shards.values() for gid, offsets in shard.offset_manager.offsets.items()}


def _best(fn, runs: int):
    results = [_timed(fn) for _ in range(runs)]
    wall = min(r[0] for r in results)
    cpu = min(r[1] for r in results)
    return wall, cpu, results[-1][2]


def _e2e(without_checkpoints: Path, with_checkpoints: Path, runs: int) -> dict:
    """Process start to serving, median of `runs`, interleaved so that drifts in machine load hit
    the three alike (each start works on its own copy of the store)."""
    probes = store_bench.probe_groups()
    times: dict[str, list[float]] = {"e2e empty s": [], "e2e full replay s": [], "e2e ckpt+tail s": [],
                                     "e2e port open, full replay s": [], "e2e port open, ckpt+tail s": []}
    for _ in range(runs):
        # the wall time from spawn to serving every probe group, and to the port taking a connection
        times["e2e empty s"].append(store_bench.start_times(None, probes)["seconds"])
        for name, store in (("full replay", without_checkpoints), ("ckpt+tail", with_checkpoints)):
            ready = store_bench.start_times(store, probes)
            times[f"e2e {name} s"].append(ready["seconds"])
            times[f"e2e port open, {name} s"].append(ready["port_open"])
    out = {name: median(values) for name, values in times.items()}
    out["e2e ckpt+tail - empty s"] = out["e2e ckpt+tail s"] - out["e2e empty s"]
    return out


def _decode(data: Path) -> int:
    """Every record's key and value cut out of every segment, nothing applied: replay's first step."""
    return sum(sum(1 for _ in iter_log_key_values(f.read_bytes())) for f in sorted(data.rglob("*.log")))


def _reps(steps: dict, runs: int) -> dict[str, list]:
    """`runs` rounds of every step, in turn and in alternating order (drift in the machine's speed hits
    all alike); per step the (wall, cpu, result) of each round."""
    out: dict[str, list] = {name: [] for name in steps}
    names = list(steps)
    for i in range(runs):
        for name in names if i % 2 == 0 else names[::-1]:
            out[name].append(_timed(steps[name]))
    return out


def _times_and_ratios(times: dict[str, list[tuple[float, float]]]) -> dict:
    """Best wall and CPU time of each step; ratios are medians of the per-round ratios (the steps of a
    round ran back to back)."""
    def per_round(a: str, b: str) -> float:
        return median(ratio(x[0], y[0]) for x, y in zip(times[a], times[b], strict=True))

    out = {}
    for name, label in (("decode", "decode"), ("full", "full replay"), ("ckpt", "ckpt+tail")):
        out[f"{label} s"] = min(wall for wall, _ in times[name])
        out[f"{label} cpu s"] = min(cpu for _, cpu in times[name])
    out.update({"full/decode": per_round("full", "decode"), "ckpt+tail/decode": per_round("ckpt", "decode"),
                "full/ckpt+tail": per_round("full", "ckpt")})
    return out


def measure(n: int, runs: int, e2e: bool) -> dict:
    store = store_bench.generate(n)
    work = Path(tempfile.mkdtemp(prefix="kcoord-bench-coordinator-load-"))
    try:
        data = work / "data"
        shutil.copytree(store, data, ignore=shutil.ignore_patterns(".complete"))
        row: dict = {"live offsets": n, "groups": min(n, store_bench.GROUPS)}
        read_s, read_cpu, size = _best(lambda: _read_bytes(data), max(runs, READ_RUNS))
        open_s, _, mgr = _timed(lambda: LogManager(str(data)))
        first_s, _, checkpoint_bytes = _timed(lambda: _write_checkpoints(mgr, store_bench.PARTITIONS))
        _append_tail(mgr, n)
        reps = _reps({
            "decode": lambda: _decode(data),
            "full": lambda: _load(mgr, store_bench.PARTITIONS, False),
            "ckpt": lambda: _load(mgr, store_bench.PARTITIONS, True),
        }, ROUNDS.get(n, runs))
        decoded = reps["decode"][-1][2]
        assert decoded >= n, (decoded, n)  # the offsets, and the groups' metadata records
        full, resumed = reps["full"][-1][2], reps["ckpt"][-1][2]
        assert sum(map(len, _offsets(full).values())) == n
        assert _offsets(resumed) == _offsets(full), "checkpoint + tail differs from a full replay"
        times = {name: [(wall, cpu) for wall, cpu, _ in rounds] for name, rounds in reps.items()}
        del full, resumed, reps  # the coordinators
        asyncio.run(mgr.close())
        starts = _e2e(store, data, E2E_RUNS) if e2e else {}  # before the refresh: checkpoints + the tail
        mgr = LogManager(str(data))
        refresh_s, refresh_cpu, _ = _timed(lambda: _refresh_checkpoints(mgr, store_bench.PARTITIONS))
        asyncio.run(mgr.close())
        row.update({
            "store MB": round(size / 1e6, 1), "checkpoints MB": round(checkpoint_bytes / 1e6, 1),
            "records": decoded, "read bytes s": read_s, "open+recover s": open_s, **_times_and_ratios(times),
            "read cpu s": read_cpu,
            "first checkpoints s": first_s, "refresh checkpoints s": refresh_s,
            "refresh checkpoints cpu s": refresh_cpu, **starts,
        })
        return row
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(quick: bool = False, e2e: bool | None = None) -> dict:
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    e2e = (not quick) if e2e is None else e2e
    rows = [measure(n, RUNS, e2e) for n in sizes]
    return {
        "name": "coordinator_load",
        "settings": settings(runs=RUNS, e2e_runs=E2E_RUNS, rounds=",".join(f"{n}:{r}" for n, r in ROUNDS.items()), read_runs=READ_RUNS, timing="rounds of decode, full, ckpt+tail in turn; times best of rounds, ratios median of rounds' ratios", tail_commits=TAIL,
                             offsets_partitions=store_bench.PARTITIONS, records_per_batch=store_bench.BATCH),
        "rows": rows,
        "notes": [
            "full replay / ckpt+tail: segments on disk (page cache) -> groups served by a GroupCoordinatorService, "
            "as GroupRuntime loads them; open+recover (storage's CRC check at start) is separate.",
            "first checkpoints: full replay + write of all 50 (a first start without them); refresh "
            "checkpoints: all 50 rewritten after the tail (which touches every group: a worst case).",
            "e2e: process start -> OffsetFetch answers on every offsets partition (bench.load.start_time, "
            "median of runs, interleaved): the store before any checkpoint exists, with the checkpoints "
            "and tail written in process, and an empty store (interpreter start and imports).",
        ],
    }


if __name__ == "__main__":
    if "--e2e" in sys.argv:
        sys.argv.remove("--e2e")
        main(lambda quick=False: run(quick, e2e=True))
    else:
        main(run)
