"""Ceiling: the most any Python server can answer on this machine, and the generator's capacity.

`python -m bench.ceiling --serve PORT` is a minimal uvloop server that only splits frames and
answers each with a fixed HeartbeatResponse v4 — no decoding, no state. Driven by the same C
generator as the heartbeat benchmark, its rate is the ceiling kcoord is compared with. The
generator itself is measured against its own C fixed-answer server: if that rate is several
times the Python ceiling, the generator is not what limits the Python numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

from bench import loadgen
from bench import loadgen_wire as w
from bench.runner import ROOT, main, median, ratio, settings

_SIZE = struct.Struct(">i")
_RESPONSE = _SIZE.pack(len(w.HEARTBEAT_OK)) + w.HEARTBEAT_OK
_CORR_AT = 4  # in our answer: right after the size


class FixedAnswer(asyncio.Protocol):
    """Frame requests, answer each with the fixed response carrying its correlation id."""

    def connection_made(self, transport):
        self.transport = transport
        self.buf = bytearray()

    def data_received(self, data):
        buf = self.buf
        buf += data
        off, n, out = 0, len(buf), bytearray()
        while n - off >= 12:
            size = _SIZE.unpack_from(buf, off)[0]
            if n - off - 4 < size:
                break
            answer = bytearray(_RESPONSE)
            answer[_CORR_AT : _CORR_AT + 4] = buf[off + 8 : off + 12]
            out += answer
            off += 4 + size
        del buf[:off]
        if out:
            self.transport.write(out)


def serve(port: int, lifetime: float) -> None:
    import uvloop

    async def main_():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(FixedAnswer, "127.0.0.1", port, backlog=4096)
        print("listening", flush=True)
        await asyncio.sleep(lifetime)  # stops by itself even if the parent dies
        server.close()

    uvloop.run(main_())


class ServerProcess:
    """A bench server module run as `python -m <module> --serve PORT ...` in a subprocess, ready once it
    prints "listening"; terminated (SIGTERM) on close."""

    def __init__(self, module: str, *args: str, lifetime: float = 900):
        self.port = loadgen.free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "--serve", str(self.port), "--lifetime", str(lifetime), *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self.proc.stdout.readline().strip() != "listening":
            self.close()
            raise RuntimeError(f"{module} server did not start")

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class PythonCeiling(ServerProcess):
    """The uvloop fixed-answer server as a subprocess."""

    def __init__(self, lifetime: float = 900):
        super().__init__("bench.ceiling", lifetime=lifetime)


def heartbeat_frames(n: int) -> list[bytes]:
    """Realistic-size requests: the heartbeats members of 100-member groups would send."""
    return [
        w.frame(
            w.HEARTBEAT,
            w.HEARTBEAT_V,
            0,
            w.heartbeat(f"bench-group-{i // 100}", 1, f"member-{i}-0123456789abcdef0123456789ab"),
        )
        for i in range(n)
    ]


@dataclass
class Target:
    """One server under the generator: where it is, what to send, how many connections."""

    port: int
    pid: int | None
    frames: list[bytes]
    conns: int
    err_offset: int = w.HEARTBEAT_ERR_OFFSET


def _once(t: Target, seconds: float, warmup: float) -> dict:
    r = loadgen.drive(t.port, t.frames, t.conns, seconds, warmup, t.err_offset, server_pid=t.pid)
    if t.pid and r.get("server_cpu_s", -1) >= 0:
        # the server's CPU inside the generator's measured window: the same window as the count
        r["server_cpu"] = r["server_cpu_s"] / r["seconds"] if r["seconds"] > 0 else float("nan")
        r["server_cpu_us"] = r["server_cpu_s"] / r["requests"] * 1e6 if r["requests"] else float("nan")
        r["gen_cpu_us"] = r["gen_cpu_s"] / r["requests"] * 1e6 if r["requests"] else float("nan")
    return r


def compare(targets: list[Target], seconds: float, reps: int, warmup: float = 0.5) -> list[dict]:
    """Each rep runs every target once, in turn, so drift in the machine's load (the team shares
    these cores) hits all alike. Per target: medians over reps, and `ratio`, the median over
    reps of its rate / the rate of targets[0] in the same rep; `cpu_ratio` likewise, of
    targets[0]'s server CPU per request / its own (above 1: it costs less than targets[0])."""
    runs: list[list[dict]] = [[] for _ in targets]
    for _ in range(reps):
        for i, t in enumerate(targets):
            runs[i].append(_once(t, seconds, warmup))
    out = []
    for rs in runs:
        rates = [r["rps"] for r in rs]
        out.append(
            {
                "rps": median(rates),
                "p50_us": median(r["p50_us"] for r in rs),
                "p99_us": median(r["p99_us"] for r in rs),
                "gen_cpu": median(r["cpu"] for r in rs),
                "server_cpu": median(r.get("server_cpu") for r in rs),
                "server_cpu_us": median(r.get("server_cpu_us") for r in rs),
                "gen_cpu_us": median(r.get("gen_cpu_us") for r in rs),
                "errors": sum(r["errors"] + r["bad_corr"] + r["closed"] for r in rs),
                "spread": max(rates) / min(rates) if min(rates) > 0 else float("nan"),
                "ratio": median(ratio(r["rps"], b["rps"]) for r, b in zip(rs, runs[0], strict=True)),
                "ratios": [ratio(r["rps"], b["rps"]) for r, b in zip(rs, runs[0], strict=True)],
                "cpu_ratio": median(
                    ratio(b.get("server_cpu_us"), r.get("server_cpu_us")) for r, b in zip(rs, runs[0], strict=True)
                ),
            }
        )
    return out


def run(quick: bool = False) -> dict:
    sizes = [100, 1000] if quick else [100, 1000, 10_000]
    # (seconds, reps) per window. Few connections finish a window in many short turns of both
    # processes, so their rate swings with whatever else the two cores run: more, shorter reps make
    # the median ratio repeat (3 x 1.5 s moved it +-16% at 100 connections). 10,000 connections are
    # steadier and costlier to open, so they keep fewer, longer ones.
    plan = {100: (1.0, 7), 1000: (1.0, 7), 10_000: (1.5, 3)}
    if quick:
        plan = {n: (1.0, 2) for n in sizes}
    rows = []
    t0 = time.monotonic()
    with loadgen.CServer(w.HEARTBEAT_OK) as cserver, PythonCeiling() as pyserver:
        for conns in sizes:
            frames = heartbeat_frames(min(conns, 10_000))
            c, p = compare(
                [
                    Target(cserver.port, cserver.proc.pid, frames, conns),
                    Target(pyserver.port, pyserver.proc.pid, frames, conns),
                ],
                *plan[conns],
            )
            for label, m in (
                ("C fixed-answer (generator capacity)", c),
                ("uvloop fixed-answer (ceiling)", p),
            ):
                rows.append(
                    {
                        "conns": conns,
                        "server": label,
                        "req/s": m["rps"],
                        "p50 us": m["p50_us"],
                        "p99 us": m["p99_us"],
                        "ratio to C": m["ratio"],
                        "server cpu": m["server_cpu"],
                        "generator cpu": m["gen_cpu"],
                        "server cpu us/req": m["server_cpu_us"],
                        "generator cpu us/req": m["gen_cpu_us"],
                        "max/min": m["spread"],
                        "reps": len(m["ratios"]),
                        "errors": m["errors"],
                    }
                )
    return {
        "name": "ceiling",
        "settings": settings(
            seconds_and_reps_by_conns={n: plan[n] for n in sizes},
            warmup_s=0.5,
            request="Heartbeat v4",
            elapsed_s=round(time.monotonic() - t0, 1),
        ),
        "rows": rows,
        "notes": [
            "cpu columns: fractions of one core, and CPU per request; the server's are read from its kernel "
            "CPU clock (ns, all threads) by the generator at the start and end of its measured window. On loopback most of "
            "either side's cost is kernel TCP work, so the C generator spends about what the bare uvloop server "
            "spends per request: with a core each they are matched, and the ceiling row is the most one Python "
            "server and this generator pass on this machine. Against kcoord (several times the CPU per request, "
            "see heartbeat) the generator has that many times headroom. On a shared machine req/s follows "
            "whoever else runs; CPU per request much less."
        ],
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--serve", type=int)
    ap.add_argument("--lifetime", type=float, default=900)
    known, rest = ap.parse_known_args()
    if known.serve:
        serve(known.serve, known.lifetime)
    else:
        sys.argv = [sys.argv[0], *rest]
        main(run)
