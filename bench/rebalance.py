"""Rebalance latency: N members form a group from scratch; then one more joins the Stable group.

group.initial.rebalance.delay.ms=0. Formation is timed from the first JoinGroup to the last
SyncGroup response of the first generation that holds all N members; members that synced an
earlier generation learn of the next one through heartbeats every `hb` seconds (as a real
consumer does, only faster) and rejoin. The join of one more member is timed the same way.

Baseline, same run: the same client doing the same 3 round trips per member (JoinGroup,
JoinGroup, SyncGroup) against the uvloop fixed-answer ceiling — what the client and the
transport cost, so the ratio is what the coordinator adds.
"""

from __future__ import annotations

import asyncio
import time

from bench import ceiling
from bench import loadgen_wire as w
from bench.loadgen_client import open_many
from bench.loadgen_members import GroupRun, Member
from bench.loadgen_server import KcoordServer
from bench.runner import arun, fit_slope, main, median, proc_cpu_seconds, raise_nofile, ratio, settings

TARGETS_S = {1000: 0.5, 5000: 3.0}


def hb_interval(n: int) -> float:
    """Heartbeat period of synced members while they wait: short, but not a flood at 5k."""
    return max(0.02, n / 20_000)


async def _form_and_grow(port: int, pid: int, n: int, group: str, timeout: float) -> dict:
    """Formation and +1 join times; the server's CPU seconds for the formation (less sensitive than
    wall time to other work on the machine); this client's CPU share during formation (near 1.0
    would mean the Python members, not the server, set the pace); the generation it ended on."""
    conns = await open_many(port, n + 1)
    try:
        members = [Member(c, group) for c in conns[:n]]
        t0, cpu0, scpu0 = time.monotonic(), time.process_time(), proc_cpu_seconds(pid)
        first = GroupRun(members, n, hb_interval(n))
        formed = await first.run(timeout) - t0
        server_cpu = proc_cpu_seconds(pid) - scpu0
        client_cpu = (time.process_time() - cpu0) / formed
        late = Member(conns[n], group)
        t1 = time.monotonic()
        grown = await GroupRun([*members, late], n + 1, hb_interval(n)).run(timeout) - t1
        return {
            "form": formed,
            "grow": grown,
            "server_cpu": server_cpu,
            "client_cpu": client_cpu,
            "generation": first.final_generation,
        }
    finally:
        for c in conns:
            c.close()


async def _floor(port: int, pid: int, n: int) -> dict:
    """Same client, same 3 round trips per member, against a server that only answers."""
    conns = await open_many(port, n)
    body = w.heartbeat("floor", 1, "member")
    try:

        async def member(c):
            for _ in range(3):
                await c.call(w.HEARTBEAT, w.HEARTBEAT_V, body)

        t0, scpu0 = time.monotonic(), proc_cpu_seconds(pid)
        await asyncio.gather(*(member(c) for c in conns))
        return {"form": time.monotonic() - t0, "server_cpu": proc_cpu_seconds(pid) - scpu0}
    finally:
        for c in conns:
            c.close()


def run(quick: bool = False) -> dict:
    raise_nofile()
    sizes = [10, 100, 1000] if quick else [10, 100, 1000, 5000]
    reps = 2 if quick else 3
    rows, xs, ys = [], [], []
    with ceiling.PythonCeiling() as floor_server:
        for n in sizes:
            floors, runs = [], []
            with KcoordServer() as server:
                arun(server.wait_ready())
                arun(
                    _form_and_grow(server.port, server.pid, min(n, 10), f"warmup-{n}", 60)
                )  # warm caches/imports
                for i in range(reps):  # alternate, so drift in machine load hits both alike
                    floors.append(arun(_floor(floor_server.port, floor_server.proc.pid, n)))
                    runs.append(arun(_form_and_grow(server.port, server.pid, n, f"rb-{n}-{i}", 120)))
            formed, grown = median(r["form"] for r in runs), median(r["grow"] for r in runs)
            floor, cpu = median(f["form"] for f in floors), median(r["server_cpu"] for r in runs)
            floor_cpu = median(f["server_cpu"] for f in floors)
            xs.append(n)
            ys.append(formed)
            target = TARGETS_S.get(n)
            rows.append(
                {
                    "members": n,
                    "form s": formed,
                    "per member ms": formed / n * 1000,
                    "target s": target if target else "",
                    "met": ("yes" if formed <= target else "NO") if target else "",
                    "+1 join s": grown,
                    "floor s": floor,
                    "ratio form/floor": ratio(formed, floor),
                    "server cpu s": cpu,
                    "cpu ratio to floor": ratio(cpu, floor_cpu),
                    "hb interval s": hb_interval(n),
                    "client cpu": median(r["client_cpu"] for r in runs),
                    "generations": median(r["generation"] for r in runs),
                    "max/min": max(r["form"] for r in runs) / min(r["form"] for r in runs),
                }
            )
    slope = fit_slope(xs, ys)
    return {
        "name": "rebalance",
        "settings": settings(
            reps=reps,
            join_version=w.JOIN_GROUP_V,
            sync_version=w.SYNC_GROUP_V,
            initial_rebalance_delay_ms=0,
            slope_ms_per_member=round(slope * 1000, 4),
        ),
        "rows": rows,
        "notes": [
            "form s: first JoinGroup -> last SyncGroup of the first generation with all members; "
            "+1 join s: one member joins the Stable group -> all N+1 synced (includes up to one heartbeat "
            "interval for the old members to notice); floor: same client, same round trips, fixed-answer "
            "server. server cpu s: CPU the server spent forming the group (steadier than wall time on a shared "
            "machine); its ratio is to the fixed-answer server's CPU for the floor. Slope is a least-squares fit "
            "of form s over members."
        ],
    }


if __name__ == "__main__":
    main(run)
