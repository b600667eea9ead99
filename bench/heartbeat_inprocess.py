"""What a steady heartbeat costs the server's frame path, in process: instructions per call (callgrind), the
consumer protocol's steady ConsumerGroupHeartbeat against the classic Heartbeat, same broker, same run.

A real Broker runs in this process on uvloop with its listener; one-member groups of both protocols form
over TCP against it (bench/consumer_group_formation, bench/loadgen_members); then each frame handler
(broker/apis/consumer_group_heartbeat.serve_frame, broker/apis/heartbeat.serve_frame) is called directly
with those members' steady frames, round robin, as KafkaConnection.data_received calls it for a read of one
whole frame. What the frame path costs on top of the socket and the event loop, which both protocols pay alike.

Counted with valgrind (`--toggle-collect` on the one C function the measured loop runs under), so a busy
machine does not move it; without valgrind, microseconds per call, alternating, for scale.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench import consumer_group_formation as formation
from bench.consumer_heartbeat import steady_frame
from bench.loadgen_members import form_groups
from bench.runner import ROOT, main, median, ratio, settings

GROUPS = 100
# the one C function the measured loop runs under (nothing on the heartbeat paths uses itertools.starmap)
TOGGLE = "starmap_next"


async def _frames(port: int, groups: int) -> tuple[list[bytes], list[bytes]]:
    """Steady heartbeat frames of `groups` one-member groups of each protocol."""
    await formation._create_topic(port, 1)
    consumer: list[bytes] = []
    for g in range(groups):
        formed: list = []
        await formation.consumer_formation(port, 1, f"cg-{g}", formed, partitions=1)
        consumer += [steady_frame(f"cg-{g}", member_id, epoch) for member_id, epoch in formed]
    members = await form_groups(port, {f"hb-{g}": 1 for g in range(groups)}, conns=groups)
    return consumer, [mb.heartbeat_frame() for mb in members]


async def _served(calls: int, kinds: list[str]) -> dict[str, float]:
    from kcoord.broker.apis import consumer_group_heartbeat, heartbeat
    from kcoord.broker.app import Broker
    from kcoord.broker.config import BrokerConfig
    from kcoord.testkit.broker_process import TEST_SETTINGS

    data = tempfile.mkdtemp(prefix="kcoord-bench-inprocess-")
    cfg = BrokerConfig.load(overrides={**TEST_SETTINGS, **formation._OVERRIDES, "listeners": "PLAINTEXT://127.0.0.1:0",
                                       "log.dirs": data})
    broker = Broker(cfg)
    await broker.start()
    try:
        await asyncio.wait_for(broker.group_coordinator.loaded_event.wait(), 60)
        consumer, classic = await _frames(broker.listeners[0].port, GROUPS)
        handlers = {"consumer": (consumer_group_heartbeat.serve_frame, consumer),
                    "classic": (heartbeat.serve_frame, classic)}
        out: dict[str, float] = {}
        for kind in kinds:
            handler, frames = handlers[kind]
            for frame in frames:  # the first steady heartbeat of each member is read in full: not measured
                answer = handler(broker, frame, "127.0.0.1")
                assert answer.__class__ is tuple and answer[0] == 0, (kind, answer)  # pyright: ignore[reportIndexIssue]
            args = [(broker, frames[i % len(frames)], "127.0.0.1") for i in range(calls)]
            t0 = time.perf_counter()
            collections.deque(itertools.starmap(handler, args), maxlen=0)
            out[kind] = (time.perf_counter() - t0) / calls * 1e6
            await asyncio.sleep(0)  # the timers the heartbeats re-armed stay out of the loop above
        return out
    finally:
        await broker.stop(timeout=5.0)
        shutil.rmtree(data, ignore_errors=True)


def _run(calls: int, kinds: list[str]) -> dict[str, float]:
    """Microseconds per frame handler call of each kind (a fresh broker, in this process, on uvloop)."""
    import uvloop

    return uvloop.run(_served(calls, kinds))


def instructions(kind: str, calls: int) -> int | None:
    """Instructions of `calls` frame handler calls of `kind` (callgrind), or None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    code = f"from bench.heartbeat_inprocess import _run; _run({calls}, [{kind!r}])"
    out = subprocess.run(["valgrind", "--tool=callgrind", f"--toggle-collect={TOGGLE}", "--callgrind-out-file=/dev/null",
                          sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "0"})
    return next(int(line.split()[-1]) for line in out.stderr.splitlines() if "Collected" in line)


def run(quick: bool = False) -> dict:
    calls, reps = (2_000, 3) if quick else (10_000, 5)
    timed: dict[str, list[float]] = {"consumer": [], "classic": []}
    for rep in range(reps):
        order = ["consumer", "classic"] if rep % 2 == 0 else ["classic", "consumer"]
        for kind, us in _run(calls * 10, order).items():
            timed[kind].append(us)
    counted = {kind: instructions(kind, calls) for kind in ("consumer", "classic")}
    row: dict = {"groups of each protocol": GROUPS, "calls": calls}
    if None not in counted.values():
        row["consumer instructions/hb"] = round(counted["consumer"] / calls)  # pyright: ignore[reportOptionalOperand]
        row["classic instructions/hb"] = round(counted["classic"] / calls)  # pyright: ignore[reportOptionalOperand]
        row["consumer/classic instructions"] = round(ratio(counted["consumer"], counted["classic"]), 2)
    row["consumer us/hb"] = round(median(timed["consumer"]), 2)
    row["classic us/hb"] = round(median(timed["classic"]), 2)
    return {"name": "heartbeat_inprocess",
            "settings": settings(groups=GROUPS, group_size=1, calls=calls, reps=reps,
                                 request="ConsumerGroupHeartbeat v1 steady / Heartbeat v4", counter="callgrind Ir"),
            "rows": [row]}


if __name__ == "__main__":
    main(run)
