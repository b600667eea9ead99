"""Memory: resident bytes per idle member and per group, from the server's /proc RSS.

Each configuration gets a fresh server: its idle RSS (after readiness) is the baseline, then
real members join and sync and go idle, and the RSS is read again once it settles.
  members: N members in groups of 100 -> (RSS - idle) / N per member (group share included)
  groups:  N groups of one member     -> (RSS - idle) / N per group (its member included)
"""

from __future__ import annotations

import time

from bench.loadgen_members import form_groups
from bench.loadgen_server import KcoordServer
from bench.runner import arun, main, raise_nofile, rss_bytes, settings

GROUP_SIZE = 100


def settled_rss(pid: int, seconds: float = 1.0) -> int:
    """Median of a few reads over `seconds`: the allocator and GC settle after a burst."""
    samples = []
    for _ in range(5):
        time.sleep(seconds / 5)
        samples.append(rss_bytes(pid))
    return sorted(samples)[2]


def measure(groups: dict[str, int]) -> tuple[int, int, float]:
    with KcoordServer() as server:
        arun(server.wait_ready())
        idle = settled_rss(server.pid)
        t0 = time.monotonic()
        arun(form_groups(server.port, groups, conns=min(sum(groups.values()), 2000), timeout=600))
        setup = time.monotonic() - t0
        return idle, settled_rss(server.pid, 2.0), setup


def run(quick: bool = False) -> dict:
    raise_nofile()
    member_counts = [10_000] if quick else [10_000, 100_000]
    rows = []
    for n in member_counts:
        idle, rss, setup = measure({f"mem-{n}-{g}": GROUP_SIZE for g in range(n // GROUP_SIZE)})
        rows.append(
            {
                "shape": f"{n:,} members in groups of {GROUP_SIZE}",
                "idle RSS MB": idle / 1e6,
                "RSS MB": rss / 1e6,
                "ratio to idle": rss / idle,
                "bytes per member": (rss - idle) / n,
                "bytes per group": "",
                "join setup s": setup,
            }
        )
    g = 10_000
    idle, rss, setup = measure({f"mem1-{i}": 1 for i in range(g)})
    rows.append(
        {
            "shape": f"{g:,} groups of 1 member",
            "idle RSS MB": idle / 1e6,
            "RSS MB": rss / 1e6,
            "ratio to idle": rss / idle,
            "bytes per member": "",
            "bytes per group": (rss - idle) / g,
            "join setup s": setup,
        }
    )
    return {
        "name": "memory",
        "settings": settings(
            group_size=GROUP_SIZE, session_timeout_ms=300_000, source="/proc/<pid>/status VmRSS"
        ),
        "rows": rows,
        "notes": [
            "bytes per group includes its one member; members connect only to join, so connection "
            "buffers are not counted."
        ],
    }


if __name__ == "__main__":
    main(run)
