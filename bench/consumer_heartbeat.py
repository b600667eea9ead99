"""ConsumerGroupHeartbeat (KIP-848) steady-state throughput: N consumer-protocol members in groups of 100,
one heartbeat in flight each, against the echo ceiling.

Members first form their groups for real (bench/consumer_group_formation: epoch 0, reconciliation, until
ConsumerGroupDescribe says Stable). Then the C generator opens one connection per member and sends each
member's steady heartbeat back to back for a fixed time: ConsumerGroupHeartbeat v1 with its id and epoch
and nothing else (no subscription, no owned partitions: what a stable Java or librdkafka consumer sends).
Measured in the same run, rep by rep in turn: the uvloop fixed-answer ceiling (bench/ceiling) at the
same connection count -- the ratio -- and, for scale, the classic Heartbeat v4 of as many classic members
in groups of 100 on the same server.
"""
from __future__ import annotations

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


def form_consumer_groups(port: int, n: int) -> list[bytes]:
    """Form n members in groups of GROUP_SIZE; each member's steady heartbeat frame."""
    frames: list[bytes] = []
    for g in range(max(1, n // GROUP_SIZE)):
        group, formed = f"cgh-{n}-{g}", []
        arun(formation.consumer_formation(port, min(GROUP_SIZE, n), group, formed))
        frames += [steady_frame(group, member_id, epoch) for member_id, epoch in formed]
    return frames


def measure(n: int, seconds: float, reps: int) -> dict:
    classic_groups = {f"hb-{n}-{g}": min(GROUP_SIZE, n) for g in range(max(1, n // GROUP_SIZE))}
    with ceiling.PythonCeiling() as ceil, KcoordServer(formation._OVERRIDES) as server:
        arun(server.wait_ready())
        arun(formation._create_topic(server.port))
        t0 = time.monotonic()
        consumer = form_consumer_groups(server.port, n)
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
        "ConsumerGroupHeartbeat/s": k["rps"],
        "p50 ms": k["p50_us"] / 1000,
        "p99 ms": k["p99_us"] / 1000,
        "ceiling req/s": base["rps"],
        "ratio": k["ratio"],
        "classic Heartbeat/s (same server)": c["rps"],
        "classic ratio": c["ratio"],
        "consumer/classic": round(ratio(k["rps"], c["rps"]), 2),
        "server cpu us/hb": k["server_cpu_us"],
        "classic server cpu us/hb": c["server_cpu_us"],
        "ceiling cpu us/req": base["server_cpu_us"],
        "errors": k["errors"] + c["errors"],
        "formation setup s": round(setup_s, 1),
    }


def run(quick: bool = False) -> dict:
    raise_nofile()
    sizes = [100] if quick else [100, 1000]
    seconds, reps = (1.0, 2) if quick else (1.5, 5)
    return {
        "name": "consumer_heartbeat",
        "settings": settings(group_size=GROUP_SIZE, seconds_per_rep=seconds, reps=reps, warmup_s=0.5,
                             request=f"ConsumerGroupHeartbeat v{VERSION} (steady: id and epoch only)",
                             baseline="uvloop fixed-answer server, same generator and connections"),
        "rows": [measure(n, seconds, reps) for n in sizes],
    }


if __name__ == "__main__":
    main(run)
