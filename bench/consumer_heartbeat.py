"""ConsumerGroupHeartbeat (KIP-848) steady-state throughput: N consumer-protocol members in groups of 100
(and 1,000 one-member groups), one heartbeat in flight each, against the echo ceiling.

Members first form their groups for real (bench/consumer_group_formation: epoch 0, reconciliation, until
ConsumerGroupDescribe says Stable). Then the C generator opens one connection per member and sends each
member's steady heartbeat back to back for a fixed time: ConsumerGroupHeartbeat v1 with its id and epoch
and nothing else (no subscription, no owned partitions: what a stable Java or librdkafka consumer sends).
Measured in the same run, rep by rep in turn: the uvloop fixed-answer ceiling (bench/ceiling) at the
same connection count -- the ratio -- and, for scale, the classic Heartbeat v4 of as many classic members
in groups of the same size on the same server (issue #30's target: at least 0.9x the classic ratio).
"""
from __future__ import annotations

import asyncio
import time

from bench import ceiling
from bench import consumer_group_formation as formation
from bench import loadgen_wire as w
from bench.loadgen_members import form_groups
from bench.loadgen_server import KcoordServer
from bench.runner import arun, main, raise_nofile, ratio, settings
from kcoord.protocol import messages as m

GROUP_SIZE = 100
VERSION = 1
_req = m.codec("ConsumerGroupHeartbeatRequest", VERSION)
_R = m.ConsumerGroupHeartbeatRequest
ERR_OFFSET = w.HEARTBEAT_ERR_OFFSET  # response header v1, throttle_time_ms, then error_code: as Heartbeat v4


def steady_frame(group: str, member_id: str, epoch: int) -> bytes:
    body = _req.encode(_R(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
                          rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                          server_assignor=None, topic_partitions=None))
    return w.frame(formation.HEARTBEAT, VERSION, 0, body)


FORMING_AT_ONCE = 100  # groups formed concurrently (one-member groups: one at a time would take minutes)


def form_consumer_groups(port: int, n: int, group_size: int = GROUP_SIZE) -> list[bytes]:
    """Form n members in groups of `group_size`; each member's steady heartbeat frame."""
    groups = [f"cgh-{n}-{group_size}-{g}" for g in range(max(1, n // group_size))]
    frames: list[bytes] = []
    for i in range(0, len(groups), FORMING_AT_ONCE):
        formed: list[list] = [[] for _ in groups[i:i + FORMING_AT_ONCE]]

        async def form_some(names: list[str] = groups[i:i + FORMING_AT_ONCE], formed: list[list] = formed) -> None:
            await asyncio.gather(*(formation.consumer_formation(port, min(group_size, n), name, out)
                                   for name, out in zip(names, formed, strict=True)))

        arun(form_some())
        for group, members in zip(groups[i:i + FORMING_AT_ONCE], formed, strict=True):
            frames += [steady_frame(group, member_id, epoch) for member_id, epoch in members]
    return frames


def measure(n: int, seconds: float, reps: int, group_size: int = GROUP_SIZE) -> dict:
    classic_groups = {f"hb-{n}-{group_size}-{g}": min(group_size, n) for g in range(max(1, n // group_size))}
    with ceiling.PythonCeiling() as ceil, KcoordServer(formation._OVERRIDES) as server:
        arun(server.wait_ready())
        arun(formation._create_topic(server.port))
        t0 = time.monotonic()
        consumer = form_consumer_groups(server.port, n, group_size)
        setup_s = time.monotonic() - t0
        classic = [mb.heartbeat_frame() for mb in arun(form_groups(server.port, classic_groups, conns=min(n, 2000)))]
        base, k, c = ceiling.compare([
            ceiling.Target(ceil.port, ceil.proc.pid, consumer, n, ERR_OFFSET),
            ceiling.Target(server.port, server.pid, consumer, n, ERR_OFFSET),
            ceiling.Target(server.port, server.pid, classic, n, w.HEARTBEAT_ERR_OFFSET),
        ], seconds, reps)
    return {
        "members": n,
        "groups": len(classic_groups),
        "group size": group_size,
        "ConsumerGroupHeartbeat/s": k["rps"],
        "p50 ms": k["p50_us"] / 1000,
        "p99 ms": k["p99_us"] / 1000,
        "ceiling req/s": base["rps"],
        "ratio": k["ratio"],
        "classic Heartbeat/s (same server)": c["rps"],
        "classic ratio": c["ratio"],
        "consumer/classic": round(ratio(k["rps"], c["rps"]), 2),
        "consumer ratio / classic ratio": round(ratio(k["ratio"], c["ratio"]), 2),
        "server cpu us/hb": k["server_cpu_us"],
        "classic server cpu us/hb": c["server_cpu_us"],
        "ceiling cpu us/req": base["server_cpu_us"],
        "errors": k["errors"] + c["errors"],
        "formation setup s": round(setup_s, 1),
    }


def run(quick: bool = False) -> dict:
    raise_nofile()
    # (members, group size): 1,000 one-member groups is issue #30's row
    sizes = [(1000, 1)] if quick else [(100, GROUP_SIZE), (1000, GROUP_SIZE), (1000, 1)]
    seconds, reps = (1.0, 2) if quick else (1.5, 5)
    return {
        "name": "consumer_heartbeat",
        "settings": settings(group_sizes=sorted({size for _n, size in sizes}), seconds_per_rep=seconds, reps=reps, warmup_s=0.5,
                             request=f"ConsumerGroupHeartbeat v{VERSION} (steady: id and epoch only)",
                             baseline="uvloop fixed-answer server, same generator and connections"),
        "rows": [measure(n, seconds, reps, size) for n, size in sizes],
    }


if __name__ == "__main__":
    main(run)
