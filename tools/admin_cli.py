"""`kcoord faults` and the timer commands of `kcoord groups`: the admin endpoint (kcoord.admin.listener)
from the command line. The endpoint's address comes from --admin or $KCOORD_ADMIN.

  kcoord faults add --api Heartbeat --error REBALANCE_IN_PROGRESS --group-id my-group --count 3
  kcoord faults add --api SyncGroup --delay-ms 2000 --count 1
  kcoord faults add --api Produce --throttle-ms 500 --client-id my-app   # throttled as by a quota (KIP-219)
  kcoord faults add --api FindCoordinator --close --probability 0.2 --seed 42
  kcoord faults add --json '{"api": "OffsetCommit", "error": "NOT_COORDINATOR", "after": 5}'
  kcoord faults list | remove ID | clear
  kcoord groups expire-member GROUP MEMBER      the member's session expires now (cause: session_timeout)
  kcoord groups fire-timers GROUP               the group's pending join / sync timers fire now
  kcoord groups run-retention                   offset retention runs now
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from kcoord.broker.admin_client import AdminClient, AdminRequestError

ADMIN_ENV = "KCOORD_ADMIN"
TIMER_COMMANDS = ("expire-member", "fire-timers", "run-retention")
LIST_COLUMNS = ("ID", "API", "ACTION", "MATCH", "AFTER", "COUNT", "PROBABILITY", "MATCHED", "FIRED")


def _admin_arg(parser: argparse.ArgumentParser, default=None) -> None:
    parser.add_argument("--admin", default=default if default is not None else os.environ.get(ADMIN_ENV),
                        help=f"http://HOST:PORT of the server's admin endpoint (default ${ADMIN_ENV})")


def build_faults_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcoord faults", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _admin_arg(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add = sub.add_parser("add", help="install a fault")
    add.add_argument("--json", help="the whole fault as JSON (the other options are then not allowed)")
    add.add_argument("--api", help="API name (Heartbeat, SyncGroup, OffsetCommit, ...) or key")
    add.add_argument("--version", type=int, help="only this version of the API")
    what = add.add_mutually_exclusive_group()
    what.add_argument("--error", help="answer with this error (name or code)")
    what.add_argument("--close", action="store_true", help="close the connection instead of answering")
    what.add_argument("--throttle-ms", type=int,
                      help="answer normally with this throttle_time_ms, then read nothing from the client that long")
    add.add_argument("--delay-ms", type=int, help="wait this long first (alone: then serve normally)")
    for name in ("group-id", "topic", "client-id", "member-id"):
        add.add_argument(f"--{name}", help=f"only requests naming this {name.replace('-', ' ')}")
    add.add_argument("--after", type=int, help="let the first N matching requests through")
    add.add_argument("--count", type=int, help="fire on the next N matches (default: every match)")
    add.add_argument("--probability", type=float, help="fire on a match with this probability")
    add.add_argument("--seed", type=int, help="seed of the probability draws (deterministic)")
    sub.add_parser("list", help="installed faults with their counters")
    remove = sub.add_parser("remove", help="remove one fault")
    remove.add_argument("id", type=int)
    sub.add_parser("clear", help="remove every fault")
    for p in sub.choices.values():  # accept --admin after the subcommand too
        p.add_argument("--admin", default=argparse.SUPPRESS)
    return parser


def fault_from_args(args: argparse.Namespace) -> dict:
    options = {"api": args.api, "version": args.version, "error": args.error, "delay_ms": args.delay_ms,
               "group_id": args.group_id, "topic": args.topic, "client_id": args.client_id,
               "member_id": args.member_id, "after": args.after, "count": args.count,
               "probability": args.probability, "seed": args.seed, "throttle_ms": args.throttle_ms}
    given = {k: v for k, v in options.items() if v is not None}
    if args.json is not None:
        if given or args.close:
            raise SystemExit("kcoord faults add: --json carries the whole fault; give no other options")
        try:
            return json.loads(args.json)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"kcoord faults add: --json is not valid JSON: {exc}") from None
    if args.api is None:
        raise SystemExit("kcoord faults add: --api is required")
    given["action"] = ("close" if args.close else "error" if args.error is not None
                       else "throttle" if args.throttle_ms is not None else "delay")
    return given


def _match_text(fault: dict) -> str:
    parts = [f"{k}={fault[k]}" for k in ("group_id", "topic", "client_id", "member_id") if k in fault]
    if "version" in fault:
        parts.insert(0, f"v{fault['version']}")
    return " ".join(parts) or "*"


def _action_text(fault: dict) -> str:
    action = fault["error"] if fault["action"] == "error" else fault["action"]
    if fault["action"] == "throttle":
        action += f" {fault['throttle_ms']}ms"
    return f"{action} +{fault['delay_ms']}ms" if fault.get("delay_ms") and fault["action"] != "delay" else (
        f"delay {fault['delay_ms']}ms" if fault["action"] == "delay" else action)


def print_faults(faults: list[dict], out) -> None:
    rows = [(str(f["id"]), f["api"], _action_text(f), _match_text(f), str(f["after"]),
             "-" if f["count"] is None else str(f["count"]), f"{f['probability']:g}", str(f["matched"]),
             str(f["fired"]) + (" (done)" if f["exhausted"] else "")) for f in faults]
    widths = [max(len(c) for c in col) for col in zip(LIST_COLUMNS, *rows, strict=False)]
    for row in (LIST_COLUMNS, *rows):
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def _client(args: argparse.Namespace) -> AdminClient:
    if not args.admin:
        raise AdminRequestError(0, f"no admin endpoint: pass --admin http://HOST:PORT or set ${ADMIN_ENV} "
                                   "(the server needs kcoord.admin.listener)")
    return AdminClient(args.admin)


def run_faults(args: argparse.Namespace, out) -> None:
    client = _client(args)
    if args.command == "add":
        fault = client.request("POST", "/faults", fault_from_args(args))["faults"][0]
        out.write(f"fault {fault['id']} added\n")
    elif args.command == "list":
        print_faults(client.faults.list(), out)
    elif args.command == "remove":
        client.faults.remove(args.id)
        out.write(f"fault {args.id} removed\n")
    else:
        out.write(f"{client.faults.clear()} faults cleared\n")


def faults_main(argv: list[str]) -> int:
    args = build_faults_parser().parse_args(argv)
    return _report(run_faults, args)


# -- the timer commands of `kcoord groups` --------------------------------------------------------------
def add_timer_commands(sub) -> None:
    """Register expire-member / fire-timers / run-retention on `kcoord groups`' subparsers."""
    expire = sub.add_parser("expire-member", help="expire a member's session now (admin endpoint)")
    expire.add_argument("group")
    expire.add_argument("member")
    fire = sub.add_parser("fire-timers", help="fire a group's pending join / sync timers now (admin endpoint)")
    fire.add_argument("group")
    sub.add_parser("run-retention", help="run offset retention now (admin endpoint)")
    for name in TIMER_COMMANDS:
        _admin_arg(sub.choices[name])


def run_timers(args: argparse.Namespace, out) -> None:
    timers = _client(args).timers
    if args.command == "expire-member":
        timers.expire_member(args.group, args.member)
        out.write(f"member {args.member} of group {args.group} expired\n")
    elif args.command == "fire-timers":
        out.write(f"{timers.fire(args.group)} timers of group {args.group} fired\n")
    else:
        out.write(f"offset retention ran: {timers.run_retention()} records written\n")


def timers_main(args: argparse.Namespace) -> int:
    return _report(run_timers, args)


def _report(run, args: argparse.Namespace) -> int:
    try:
        run(args, sys.stdout)
    except AdminRequestError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0
