"""Groups spread over two coordinators (issue #27): heartbeats per second of 2,000 single-member classic
groups served by a 2-node cluster, each node coordinating the groups of the `__consumer_offsets`
partitions it leads, against a 1-node cluster serving them all alone, in the same run.

Both clusters run at once (real etcd each, `kcoord serve` processes, 8 `__consumer_offsets` partitions,
replication factor 1 so that each node leads its half alone). The groups are formed for real on the node
FindCoordinator names for them (JoinGroup, SyncGroup; bench/loadgen_members), then the C generator sends
each member's Heartbeat v4 back to back, one in flight per member on its own connection: one generator
against the lone node, or one per node at the same time against the pair (their rates summed). Reps
alternate between the two setups so that the machine's drift (two cores shared with other work) hits
both alike; the ratio is the median of each rep's pair / single. Heartbeats write nothing, so what the
second node adds is its own event loop: on this 2-core machine the generators, etcd and the nodes share
the same two cores, which bounds what a second node can add.
"""
from __future__ import annotations

import tempfile
import threading
import time

from bench import loadgen
from bench import loadgen_wire as w
from bench.loadgen_members import form_groups
from bench.runner import arun, main, median, raise_nofile, ratio, settings

GROUPS = 2000
OFFSETS_PARTITIONS = 8
OVERRIDES = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS), "offsets.topic.replication.factor": "1"}


def _by_coordinator(cluster, groups: list[str]) -> dict[int, list[str]]:
    """The groups each node coordinates (its `__consumer_offsets` partitions' leadership)."""
    from kcoord.protocol.consumer_offsets import partition_for

    cluster.coordinator_of(groups[0], timeout=60)  # creates __consumer_offsets and waits for its leaders
    leaders = {p: cluster.wait_leader("__consumer_offsets", p, timeout=60) for p in range(OFFSETS_PARTITIONS)}
    out: dict[int, list[str]] = {}
    for group in groups:
        out.setdefault(leaders[partition_for(group, OFFSETS_PARTITIONS)], []).append(group)
    return out


def _frames(cluster, groups: list[str]) -> dict[int, list[bytes]]:
    """Form every group on its coordinator; each node's members' heartbeat frames."""
    frames = {}
    for node_id, mine in _by_coordinator(cluster, groups).items():
        members = arun(form_groups(cluster.nodes[node_id].port, dict.fromkeys(mine, 1), conns=min(len(mine), 1000)))
        frames[node_id] = [member.heartbeat_frame() for member in members]
    return frames


def _drive(cluster, frames: dict[int, list[bytes]], seconds: float, warmup: float) -> dict:
    """One generator per node, all at once; the rates summed, the worst p99."""
    results: dict[int, dict] = {}

    def one(node_id: int) -> None:
        node = cluster.nodes[node_id]
        results[node_id] = loadgen.drive(node.port, frames[node_id], len(frames[node_id]), seconds, warmup,
                                         w.HEARTBEAT_ERR_OFFSET, server_pid=node.pid)

    threads = [threading.Thread(target=one, args=(n,)) for n in frames]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(results) != len(frames):
        raise RuntimeError("a generator failed")
    return {"rps": sum(r["rps"] for r in results.values()), "p99_us": max(r["p99_us"] for r in results.values()),
            "errors": sum(r["errors"] + r["bad_corr"] + r["closed"] for r in results.values()),
            "per_node": {n: round(r["rps"]) for n, r in sorted(results.items())}}


def run(quick: bool = False) -> dict:
    from kcoord.testkit.cluster import KafkaCluster

    raise_nofile()
    reps, seconds = (3, 2.0) if quick else (7, 4.0)
    groups = [f"spread-{i}" for i in range(GROUPS)]
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-spread-") as workdir:
        one = KafkaCluster(f"{workdir}/one", nodes=1, overrides=OVERRIDES)
        two = KafkaCluster(f"{workdir}/two", nodes=2, overrides=OVERRIDES)
        try:
            one.start()
            two.start()
            t0 = time.monotonic()
            one_frames, two_frames = _frames(one, groups), _frames(two, groups)
            setup_s = time.monotonic() - t0
            singles, pairs = [], []
            for rep in range(reps):  # ABBA: neither setup always runs first
                order = [(one, one_frames, singles), (two, two_frames, pairs)]
                for cluster, frames, out in (order if rep % 2 == 0 else order[::-1]):
                    out.append(_drive(cluster, frames, seconds, 0.5))
        finally:
            one.stop()
            two.stop()
    ratios = [ratio(p["rps"], s["rps"]) for p, s in zip(pairs, singles, strict=True)]
    return {
        "name": "coordinator_spread",
        "settings": settings(quick=quick, groups=GROUPS, members_per_group=1, offsets_partitions=OFFSETS_PARTITIONS,
                             offsets_replication_factor=1, reps=reps, seconds=seconds, setup_s=round(setup_s, 1),
                             groups_per_node={n: len(f) for n, f in sorted(two_frames.items())}),
        "rows": [
            {"setup": "1 node, 2,000 groups", "heartbeats_per_s": round(median(s["rps"] for s in singles)),
             "p99_us": round(median(s["p99_us"] for s in singles)), "errors": sum(s["errors"] for s in singles)},
            {"setup": "2 nodes, 2,000 groups spread", "heartbeats_per_s": round(median(p["rps"] for p in pairs)),
             "p99_us": round(median(p["p99_us"] for p in pairs)), "errors": sum(p["errors"] for p in pairs),
             "per_node": pairs[len(pairs) // 2]["per_node"]},
            {"setup": "ratio 2 nodes / 1 node", "median": round(median(ratios), 2),
             "range": f"{min(ratios):.2f}-{max(ratios):.2f}"},
        ],
        "notes": ["one generator per node at once for the pair; both clusters alive all along, reps ABBA"],
    }


if __name__ == "__main__":
    main(run)
