"""Heartbeat throughput: N real members in groups of 100, one heartbeat in flight each.

Members first join for real (MEMBER_ID_REQUIRED round trip, JoinGroup, SyncGroup) through
the Python member client; then the C generator opens one connection per member and sends
each member's Heartbeat v4 with its generation, back to back, for a fixed time. Baseline: the
uvloop fixed-answer ceiling at the same connection count, measured in the same run.
"""

from __future__ import annotations

import time

from bench import ceiling
from bench import loadgen_wire as w
from bench.loadgen_members import form_groups
from bench.loadgen_server import KcoordServer
from bench.runner import arun, main, raise_nofile, settings

GROUP_SIZE = 100
TARGET = 0.6  # of the ceiling, at 1,000 members


def measure_members(n: int, seconds: float, reps: int) -> tuple[dict, dict]:
    """(ceiling, kcoord) at n connections, interleaved rep by rep; kcoord's ratio is to the ceiling."""
    groups = {f"hb-{n}-{g}": min(GROUP_SIZE, n) for g in range(max(1, n // GROUP_SIZE))}
    with ceiling.PythonCeiling() as ceil, KcoordServer() as server:
        arun(server.wait_ready())
        t0 = time.monotonic()
        members = arun(form_groups(server.port, groups, conns=min(n, 2000)))
        setup_s = time.monotonic() - t0
        frames = [m.heartbeat_frame() for m in members]
        base, k = ceiling.compare(
            [
                ceiling.Target(ceil.port, ceil.proc.pid, frames, n),
                ceiling.Target(server.port, server.pid, frames, n),
            ],
            seconds,
            reps,
        )
    k["setup_s"], k["groups"] = setup_s, len(groups)
    return base, k


def run(quick: bool = False) -> dict:
    raise_nofile()
    sizes = [100, 1000] if quick else [100, 1000, 10_000]
    seconds, reps = (1.0, 3) if quick else (1.5, 4)
    rows = []
    for n in sizes:
        base, k = measure_members(n, seconds, reps)
        rows.append(
            {
                "members": n,
                "groups": k["groups"],
                "heartbeats/s": k["rps"],
                "p50 ms": k["p50_us"] / 1000,
                "p99 ms": k["p99_us"] / 1000,
                "ceiling req/s": base["rps"],
                "ratio": k["ratio"],
                "target": f">= {TARGET}" if n == 1000 else "",
                "met": ("yes" if k["ratio"] >= TARGET else "NO") if n == 1000 else "",
                "server cpu": k["server_cpu"],
                "ceiling cpu": base["server_cpu"],
                "generator cpu": k["gen_cpu"],
                "server cpu us/hb": k["server_cpu_us"],
                "ceiling cpu us/req": base["server_cpu_us"],
                "cpu ratio": k["cpu_ratio"],
                "errors": k["errors"],
                "join setup s": k["setup_s"],
                "max/min": k["spread"],
            }
        )
    return {
        "name": "heartbeat",
        "settings": settings(
            group_size=GROUP_SIZE,
            seconds_per_rep=seconds,
            reps=reps,
            warmup_s=0.5,
            request=f"Heartbeat v{w.HEARTBEAT_V}",
            in_flight_per_member=1,
        ),
        "rows": rows,
        "notes": [
            "ratio = median over reps of kcoord heartbeats/s / uvloop fixed-answer ceiling at the same "
            "connection count, measured alternately in the same run with the same generator and the same "
            "frames; cpu ratio = median over reps of ceiling CPU per request / kcoord CPU per heartbeat (the same "
            "comparison by CPU cost, steadier on a shared machine). Server CPU is read by the generator from the "
            "server's kernel CPU clock (ns, all threads) at the start and end of its measured window, the window "
            "the requests are counted in (connecting 10k sockets, warm-up and teardown are outside it); "
            "server cpu = that CPU / the window (cores). errors = non-zero error codes + lost answers (must be 0)."
        ],
    }


if __name__ == "__main__":
    main(run)
