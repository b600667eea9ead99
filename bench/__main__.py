"""`python -m bench [--quick] [all | name ...]`: run benchmarks, print one markdown report.

Each benchmark runs in turn in this process through its `run(quick)`; a missing module (a
colleague's not merged yet) or a failing one becomes a line in the report, not a crash. The
report and each result's JSON land in bench/results/.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback

from bench.runner import RESULTS, enable_profiling, save, settings, table

# ours first (ceiling is every throughput figure's baseline), then colleagues' modules
OURS = ["ceiling", "heartbeat", "heartbeat_tls", "rebalance", "offsets", "load", "memory", "e2e", "replication"]
THEIRS = ["codec", "storage", "coordinator_load", "clean_start", "analytics", "fixture", "consumer_groups", "transactions", "transactions_breakdown",
          "consumer_group_formation", "consumer_heartbeat", "heartbeat_inprocess", "uniform_assignor", "formation_inprocess",
          "coordinator_failover", "coordinator_spread", "share_groups"]
ALL = OURS + THEIRS


def run_one(name: str, quick: bool) -> tuple[dict | None, str]:
    try:
        module = importlib.import_module(f"bench.{name}")
    except ModuleNotFoundError as exc:
        if exc.name in (f"bench.{name}",):
            return None, f"### {name}\n\nskipped: bench/{name}.py is not in this tree\n"
        return None, f"### {name}\n\nskipped: cannot import ({exc})\n"
    t0 = time.monotonic()
    try:
        result = module.run(quick=quick)
    except Exception as exc:  # one broken benchmark must not hide the others' numbers
        traceback.print_exc()
        return None, f"### {name}\n\nfailed after {time.monotonic() - t0:.1f}s: {type(exc).__name__}: {exc}\n"
    result.setdefault("settings", {})["elapsed_s"] = round(time.monotonic() - t0, 1)
    save(result)
    return result, table(result)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench")
    ap.add_argument("names", nargs="*", default=["all"], help=f"all, or any of: {', '.join(ALL)}")
    ap.add_argument("--quick", action="store_true", help="short settings for development")
    ap.add_argument("--profile", action="store_true", help="run kcoord under pyinstrument (slower)")
    args = ap.parse_args()
    if args.profile:
        enable_profiling()
    names = ALL if "all" in args.names else args.names
    unknown = [n for n in names if n not in ALL]
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(unknown)}")

    t0 = time.monotonic()
    header = settings(quick=args.quick)
    sections = ["# kcoord benchmarks\n", "run: " + ", ".join(f"{k}={v}" for k, v in header.items()) + "\n"]
    print(sections[0] + sections[1], flush=True)
    for name in names:
        print(f"... {name}", file=sys.stderr, flush=True)
        _, text = run_one(name, args.quick)
        sections.append(text)
        print(text, flush=True)
    footer = f"total: {time.monotonic() - t0:.0f}s\n"
    sections.append(footer)
    print(footer)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "summary.md").write_text("\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
