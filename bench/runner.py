"""Results plumbing shared by every benchmark: settings, medians, tables, files.

A benchmark module exposes ``run(quick=False) -> {"name", "settings", "rows"}``; rows are flat
dicts whose values are numbers or short strings. ``main(run)`` gives each module its
``python -m bench.<name>`` entry point.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def settings(**extra) -> dict:
    """What a reader needs to compare this run with another."""
    info = {
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "machine": platform.machine(),
        "kernel": platform.release(),
        "loadavg_at_start": round(os.getloadavg()[0], 2),
        "commit": _git_commit(),
    }
    for mod in ("uvloop", "kafka", "confluent_kafka"):
        try:
            info[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):
            pass
    info.update(extra)
    return info


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def median(values) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def mean(values) -> float:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else float("nan")


def quantile(values, q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between order statistics; NaN when empty."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return float("nan")
    pos = q * (len(values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def counts(values) -> str:
    """A small distribution as text, e.g. generations over reps: "1x14 2x4 3x2"."""
    seen: dict = {}
    for v in values:
        seen[v] = seen.get(v, 0) + 1
    return " ".join(f"{v}x{seen[v]}" for v in sorted(seen))


def interleaved(steps: dict, reps: int, before=None) -> dict[str, list]:
    """Run every step once per rep, A B / B A / A B ..., and collect each step's results in order.
    Baseline and measurement take turns, and neither always goes first, so drift in the machine's
    speed (it is shared, and a VM) hits both alike. `before`, if given, runs before every step."""
    out: dict[str, list] = {name: [] for name in steps}
    order = list(steps)
    for i in range(reps):
        for name in order if i % 2 == 0 else reversed(order):
            if before is not None:
                before()
            out[name].append(steps[name]())
    return out


def ratio(value, baseline) -> float:
    """value / baseline, NaN when either side is missing: a ratio, never a crash."""
    try:
        return value / baseline if baseline else float("nan")
    except TypeError:
        return float("nan")


def arun(coro):
    """Run a coroutine on a fresh uvloop loop (the same loop kind the server uses)."""
    import uvloop

    return uvloop.run(coro)


def fit_slope(xs, ys) -> float:
    """Least-squares slope of ys over xs (e.g. seconds per member)."""
    n = len(xs)
    if n < 2:
        return float("nan")
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else float("nan")


def raise_nofile() -> int:
    """Raise this process's open-file limit to its hard limit (10k connections need it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def proc_cpu_seconds(pid: int) -> float:
    """CPU seconds a process (any of ours) has used so far, every thread included, exited ones too.

    Read from the kernel's per-process CPU clock (clock_getcpuclockid: the same sum of scheduler
    runtime as /proc/<pid>/task/*/schedstat, plus the threads that have exited), so it has ns
    resolution; /proc/<pid>/stat counts in 10 ms ticks, the whole of a small formation. Falls back
    to those ticks where the clock cannot be read."""
    try:
        return time.clock_gettime(_process_cpu_clock(pid))
    except OSError:
        return proc_cpu_ticks_seconds(pid)


def _process_cpu_clock(pid: int) -> int:
    # Linux's encoding of clock_getcpuclockid(pid): ~pid << 3 | CPUCLOCK_SCHED (2), process-wide.
    return ((~pid) << 3) | 2


def proc_cpu_ticks_seconds(pid: int) -> float:
    """User + system CPU from /proc/<pid>/stat: clock ticks (10 ms), the old, coarse reading."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, busy_share: float = 0.05, step: float = 0.02, timeout: float = 2.0) -> float:
    """Wait until process `pid` uses under `busy_share` of a core over one `step` (e.g. done closing
    the last rep's connections), at most `timeout` seconds; returns the seconds waited. So that a
    timed step does not pay for the previous one's teardown."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        c0 = proc_cpu_seconds(pid)
        time.sleep(step)
        if proc_cpu_seconds(pid) - c0 < busy_share * step:
            break
    return time.monotonic() - t0


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Deadline:
    """Monotonic deadline for bounded loops: every loop in bench stops by itself."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def expired(self) -> bool:
        return time.monotonic() >= self.end


def _fmt(v) -> str:
    if isinstance(v, float):
        if v != v:
            return "-"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.3g}" if abs(v) < 1 else f"{v:.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(result: dict) -> str:
    """Markdown: the benchmark's name, its settings line, then one row per measurement."""
    rows = result.get("rows", [])
    cols: list[str] = []
    for row in rows:
        cols += [k for k in row if k not in cols]
    lines = [f"### {result['name']}", ""]
    s = result.get("settings", {})
    if s:
        lines += ["settings: " + ", ".join(f"{k}={v}" for k, v in s.items()), ""]
    if not rows:
        lines.append("(no rows)")
    else:
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "---|" * len(cols))
        for row in rows:
            lines.append("| " + " | ".join(_fmt(row.get(c, "")) for c in cols) + " |")
    for note in result.get("notes", []):
        lines.append(f"\n_{note}_")
    return "\n".join(lines) + "\n"


def save(result: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    base = RESULTS / result["name"]
    payload = json.dumps(result, indent=2, default=str)
    base.with_suffix(".json").write_text(payload)
    (RESULTS / f"{result['name']}-{stamp}.json").write_text(payload)
    base.with_suffix(".md").write_text(table(result))
    return base.with_suffix(".md")


def enable_profiling() -> None:
    from bench.loadgen_server import PROFILE_ENV

    os.environ[PROFILE_ENV] = str(RESULTS / "profiles")


def main(run) -> None:
    """Entry point for ``python -m bench.<name> [--quick]``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="short settings for development")
    ap.add_argument("--profile", action="store_true", help="run kcoord under pyinstrument")
    args = ap.parse_args()
    if args.profile:
        enable_profiling()
    result = run(quick=args.quick)
    save(result)
    sys.stdout.write(table(result))
