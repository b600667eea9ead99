"""The pytest fixture's start-up: time from "start a broker" to its first answered request, and its idle
RSS, against starting the plain `kcoord serve` process (Kafka's defaults) in the same run, rep by rep.

  serve      `python -m kcoord.tools serve` (listeners on port 0, a fresh data dir, else defaults) started as a
             child; clock stops when ApiVersions is answered (connect retried every 2 ms)
  fixture    BrokerProcess(..., launcher=L).start(), what `kafka_broker` does: a fork of the session's
             launcher (started once, before the reps; its own start-up is reported too), test settings,
             admin endpoint, waits for __consumer_offsets to be loaded; then ApiVersions answered
  fixture, fresh interpreter   the same without the launcher (python -m kcoord.tools serve per start)
  in-process the alternative the plugin did not take: a Broker on its own event loop in a thread of a
             fresh interpreter, from `import kcoord.broker.app` to ApiVersions answered; RSS is that whole
             interpreter's (the test process would grow by about that much less a bare Python's)
Targets (issue 18): fixture <= 0.3 s, <= 40 MB.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

from bench.runner import ROOT, interleaved, main, median, ratio, rss_bytes, settings
from kcoord.protocol.client import KafkaWireClient
from kcoord.testkit.broker_process import BrokerProcess
from kcoord.testkit.launcher import Launcher

SETTLE_S = 1.0
IN_PROCESS = r"""
import asyncio, os, sys, threading, time
t0 = time.monotonic()
from kcoord.broker.app import Broker
from kcoord.broker.config import BrokerConfig
from kcoord.protocol.client import KafkaWireClient
ready, box = threading.Event(), {}
def serve():
    async def go():
        broker = Broker(BrokerConfig.load(overrides={"listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": sys.argv[1], "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "1"}))
        await broker.start()
        await broker.group_coordinator.loaded_event.wait()
        box["bootstrap"] = broker.bootstrap
        ready.set()
        await asyncio.Event().wait()
    asyncio.run(go())
threading.Thread(target=serve, daemon=True).start()
ready.wait(30)
with KafkaWireClient.connect(box["bootstrap"]) as c:
    c.api_versions()
print(time.monotonic() - t0, flush=True)
time.sleep(%(settle)s)
with open("/proc/self/status") as f:
    print(next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:")), flush=True)
"""


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)]), PYTHONUNBUFFERED="1")


def answered(port: int, deadline: float) -> None:
    while True:
        try:
            with KafkaWireClient.connect(f"127.0.0.1:{port}", timeout=5) as client:
                client.api_versions()
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plain_serve() -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()  # the ready line is not read here: the clock stops at the first answer
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "kcoord.tools", "serve", "--override",
                                 f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={tmp}/d"],
                                cwd=tmp, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            answered(port, t0 + 30)
            elapsed = time.monotonic() - t0
            time.sleep(SETTLE_S)
            return elapsed, rss_bytes(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)


def fixture(launcher: Launcher | None) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        broker = BrokerProcess(tmp, launcher=launcher).start()
        try:
            answered(broker.port, t0 + 30)
            elapsed = time.monotonic() - t0
            time.sleep(SETTLE_S)
            return elapsed, rss_bytes(broker.pid)
        finally:
            broker.stop()


def in_process() -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", IN_PROCESS % {"settle": SETTLE_S}, f"{tmp}/d"], env=_env(),
                             capture_output=True, text=True, timeout=60, check=True).stdout.split()
        return float(out[0]), int(out[1])


def run(quick: bool = False) -> dict:
    reps = 3 if quick else 9
    t0 = time.monotonic()
    launcher = Launcher()
    try:
        fixture(launcher)  # the first fork waits for the launcher's imports
        launcher_s = time.monotonic() - t0
        got = interleaved({"serve": plain_serve, "fixture": lambda: fixture(launcher),
                           "fixture, fresh interpreter": lambda: fixture(None), "in-process": in_process}, reps)
    finally:
        launcher.close()
    base_s = median(t for t, _ in got["serve"])
    base_mb = median(r for _, r in got["serve"]) / 1e6
    rows = []
    for name, target in (("serve", ""), ("fixture", "<= 0.3 s, <= 40 MB"), ("fixture, fresh interpreter", ""),
                         ("in-process", "")):
        secs = median(t for t, _ in got[name])
        mb = median(r for _, r in got[name]) / 1e6
        per_rep = [ratio(t, b) for (t, _), (b, _) in zip(got[name], got["serve"], strict=True)]
        rows.append({"start": name, "to first answer s": secs, "ratio to serve": median(per_rep),
                     "idle RSS MB": mb, "RSS ratio to serve": ratio(mb, base_mb), "target": target,
                     "min-max s": f"{min(t for t, _ in got[name]):.3f}-{max(t for t, _ in got[name]):.3f}"})
    return {"name": "fixture", "settings": settings(reps=reps, settle_s=SETTLE_S, baseline_s=round(base_s, 3),
                                                    launcher_first_broker_s=round(launcher_s, 3)),
            "rows": rows,
            "notes": [f"the launcher and its first broker, once per test session: {launcher_s:.2f} s",
                      "in-process RSS is a whole interpreter's that imported the broker; the fixture's is the "
                      "child server's alone"]}


if __name__ == "__main__":
    main(run)
