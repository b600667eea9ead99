"""Coordinator load: replaying `__consumer_offsets` records into a GroupCoordinator, in process.

Records are (key, value) pairs as protocol.consumer_offsets encodes them: 10k groups (GroupMetadata
records, Empty) and N live OffsetCommit records spread over them, plus ~10% superseded commits.
Timed: `gc.load_partition` over one partition holding all of them. Baseline, same run: the floor
any loader pays, reducing the same records to the last value per key in a dict.
"""

from __future__ import annotations

import os
import time

from coordinator import GroupConfig, GroupCoordinator
from coordinator.testing import ManualClock, RecordingWriter
from protocol import consumer_offsets as co

GROUPS = 10_000
TOPIC = "load-topic"


def make_records(offsets: int) -> list[tuple[bytes, bytes | None]]:
    now = 1_700_000_000_000
    per_group = max(1, offsets // GROUPS)
    out = []
    for g in range(min(GROUPS, offsets)):
        group = f"load-group-{g}"
        out.append(
            (
                co.encode_group_metadata_key(group),
                co.encode_group_metadata_value(co.GroupMetadataValue("consumer", 1, None, None, now)),
            )
        )
        for p in range(per_group):
            key = co.encode_offset_commit_key(group, TOPIC, p)
            if p % 10 == 0:  # an older commit of the same partition, superseded below
                out.append((key, co.encode_offset_commit_value(co.OffsetCommitValue(p, "", now - 1))))
            out.append((key, co.encode_offset_commit_value(co.OffsetCommitValue(1000 + p, "", now))))
    return out


def load_once(records) -> tuple[float, GroupCoordinator]:
    clock = ManualClock()
    gc = GroupCoordinator(GroupConfig(), clock=clock, timer=clock.timers, writer=RecordingWriter())
    start, cpu = time.perf_counter(), time.process_time()
    gc.load_partition(0, records)
    return time.perf_counter() - start, time.process_time() - cpu, gc


def baseline_once(records) -> float:
    start = time.perf_counter()
    latest = {}
    for k, v in records:
        latest[k] = v
    return time.perf_counter() - start


def run(quick: bool = False) -> dict:
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    rows = []
    for n in sizes:
        records = make_records(n)
        times, cpus = [], []
        for _ in range(3):
            t, cpu, gc = load_once(records)
            times.append(t)
            cpus.append(cpu)
        loaded = sum(len(g.offsets) for g in gc.groups.values())
        assert loaded == n, (loaded, n)
        base = min(baseline_once(records) for _ in range(3))
        best = min(times)
        rows.append(
            {
                "live_offsets": n,
                "records": len(records),
                "groups": len(gc.groups),
                "load_s": round(best, 3),
                "load_cpu_s": round(min(cpus), 3),
                "baseline_dict_s": round(base, 3),
                "ratio_vs_baseline": round(best / base, 1) if base else 0.0,
                "offsets_per_s": int(n / best),
            }
        )
    return {
        "name": "coordinator_load",
        "settings": {
            "groups": GROUPS,
            "runs": 3,
            "timing": "best of 3 (wall and process CPU)",
            "loadavg_at_start": round(os.getloadavg()[0], 2),
            "cores": os.cpu_count(),
        },
        "rows": rows,
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
