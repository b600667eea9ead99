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
import itertools
import time

from bench import ceiling
from bench import loadgen_wire as w
from bench.loadgen_client import open_many
from bench.loadgen_members import GroupRun, Member
from bench.loadgen_server import KcoordServer
from bench.runner import (
    arun,
    counts,
    fit_slope,
    interleaved,
    main,
    mean,
    median,
    proc_cpu_seconds,
    quantile,
    raise_nofile,
    ratio,
    settings,
    wait_idle,
)

TARGETS_S = {1000: 0.5, 5000: 3.0}
# reps per size: small formations take milliseconds, so many; 5000 takes ~4 s a rep with the floor
REPS = {10: 30, 100: 20, 1000: 15, 5000: 5}
QUICK_REPS = {10: 5, 100: 5, 1000: 3}


def hb_interval(n: int) -> float:
    """Heartbeat period of synced members while they wait: short, but not a flood at 5k."""
    return max(0.02, n / 20_000)


async def _leave(member: Member, members: list[Member]) -> None:
    """Everyone leaves in one batch LeaveGroup, so reps do not pile idle members (and heap for the
    collector to scan) into the server; not timed."""
    ids = [m.member_id for m in members if m.member_id]
    body = w.leave_group(member.group, ids)
    err = w.parse_leave_group(await member.conn.call(w.LEAVE_GROUP, w.LEAVE_GROUP_V, body))
    if err != w.NONE:
        raise RuntimeError(f"{member.group}: LeaveGroup error {err}")


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
        await _leave(late, [*members, late])
        return {
            "form": formed,
            "grow": grown,
            "server_cpu": server_cpu,
            "client_cpu": client_cpu,
            "generation": first.final_generation,
            "errors": first.errors,  # why members rejoined: "join 79" (MEMBER_ID_REQUIRED) is the norm
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


def measure(n: int, reps: int, floor_server: ceiling.PythonCeiling) -> tuple[list[dict], list[dict]]:
    """`reps` formations of n members and as many floors, interleaved. Every rep is kept."""
    with KcoordServer() as server:
        arun(server.wait_ready())
        arun(_form_and_grow(server.port, server.pid, min(n, 100), f"warmup-{n}", 60))  # caches, imports
        group = itertools.count()

        def idle() -> None:  # both servers done with the last step's closed connections
            wait_idle(server.pid)
            wait_idle(floor_server.proc.pid)

        out = interleaved(
            {
                "floor": lambda: arun(_floor(floor_server.port, floor_server.proc.pid, n)),
                "form": lambda: arun(_form_and_grow(server.port, server.pid, n, f"rb-{n}-{next(group)}", 120)),
            },
            reps,
            before=idle,
        )
    return out["floor"], out["form"]


def summarise(n: int, floors: list[dict], runs: list[dict]) -> dict:
    """One table row. Times are medians over reps; ratios are medians of the per-rep ratios (a
    formation over the floor measured next to it), so a drift in the machine's speed between reps
    cancels. With delay 0 most formations take one generation, some a cascade of several (2 to 25
    seen at 1000 members on a busy machine), each a multiple of the time: the mean carries the
    share of such reps, which a handful of reps cannot pin down, so it is shown, not headlined."""
    forms, floor_times = [r["form"] for r in runs], [f["form"] for f in floors]
    formed = median(forms)
    target = TARGETS_S.get(n)
    return {
        "members": n,
        "reps": len(runs),
        "form s": formed,
        "form mean s": mean(forms),
        "form p90 s": quantile(forms, 0.9),
        "form max s": max(forms),
        "per member ms": formed / n * 1000,
        "target s": target if target else "",
        "met": ("yes" if formed <= target else "NO") if target else "",
        "reps over target": sum(f > target for f in forms) if target else "",
        "+1 join s": median(r["grow"] for r in runs),
        "floor s": median(floor_times),
        "ratio form/floor": median(ratio(r["form"], f["form"]) for r, f in zip(runs, floors, strict=True)),
        "server cpu ms": median(r["server_cpu"] for r in runs) * 1000,
        "cpu ratio to floor": median(
            ratio(r["server_cpu"], f["server_cpu"]) for r, f in zip(runs, floors, strict=True)
        ),
        "hb interval s": hb_interval(n),
        "client cpu": median(r["client_cpu"] for r in runs),
        "generations": counts(r["generation"] for r in runs),
    }


def run(quick: bool = False) -> dict:
    raise_nofile()
    reps_by_size = QUICK_REPS if quick else REPS
    rows, samples, xs, ys = [], {}, [], []
    with ceiling.PythonCeiling() as floor_server:
        for n, reps in reps_by_size.items():
            floors, runs = measure(n, reps, floor_server)
            rows.append(summarise(n, floors, runs))
            samples[n] = {"floor": floors, "form": runs}
            xs += [n] * len(runs)
            ys += [r["form"] for r in runs]
    slope = fit_slope(xs, ys)
    return {
        "name": "rebalance",
        "settings": settings(
            reps=",".join(f"{n}:{r}" for n, r in reps_by_size.items()),
            join_version=w.JOIN_GROUP_V,
            sync_version=w.SYNC_GROUP_V,
            initial_rebalance_delay_ms=0,
            slope_ms_per_member=round(slope * 1000, 4),
        ),
        "rows": rows,
        "samples": samples,
        "notes": [
            "form: first JoinGroup -> last SyncGroup of the first generation with all members; "
            "+1 join s: one member joins the Stable group -> all N+1 synced (includes up to one heartbeat "
            "interval for the old members to notice); floor: same client, same round trips, fixed-answer "
            "server. Formations and floors alternate rep by rep; no rep is dropped (max, p90 and reps over "
            "target show the slow ones; every rep is in the JSON's samples, with the error answers its "
            "members got: a cascade shows as many 'sync 27', REBALANCE_IN_PROGRESS on SyncGroup).",
            "form s, floor s, met: medians over the reps; ratio form/floor and cpu ratio to floor: medians "
            "of the per-rep ratios (each formation over the floor run next to it). With delay 0 a formation "
            "ends in one generation or, now and then, after a cascade of several (generations: reps per final "
            "generation), each costing about the one-generation time again: the median is that time while "
            "such reps are under half, the mean (form mean s) also carries their share, "
            "which a few reps do not pin down. reps over target: reps slower than the target, whatever "
            "the median.",
            "server cpu ms: median CPU the server spent per formation, from its kernel CPU clock (ns, all "
            "threads, exited ones included); its ratio is to the fixed-answer server's CPU for the floor. "
            "Before each step both servers are left to go idle (the last step's connections closed). Slope "
            "is a least-squares fit of form s over members, every rep.",
        ],
    }


if __name__ == "__main__":
    main(run)
