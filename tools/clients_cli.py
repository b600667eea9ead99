"""`kcoord clients`: the client instances a running server's telemetry receiver knows (KIP-714) and the
metrics they pushed, through its admin endpoint (--admin or $KCOORD_ADMIN; kcoord.admin.listener).

  kcoord clients list                          one line per client instance
  kcoord clients metrics [--client-id ID]      every pushed metric's latest value, per instance
  kcoord clients metrics --json                the same, as the endpoint's JSON
"""
from __future__ import annotations

import argparse
import json

from kcoord.tools.admin_cli import _admin_arg, _client, _report
from kcoord.tools.groups_cli import print_table

LIST_COLUMNS = ("CLIENT-INSTANCE-ID", "CLIENT-ID", "SOFTWARE", "ADDRESS", "INTERVAL-MS", "PUSHES", "METRICS",
                "LAST-ERROR")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcoord clients", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _admin_arg(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, text in (("list", "client instances"), ("metrics", "their pushed metrics")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--client-id", help="only the instances with this client.id")
        p.add_argument("--json", action="store_true", help="print the endpoint's JSON")
        p.add_argument("--admin", default=argparse.SUPPRESS)
    return parser


def run(args: argparse.Namespace, out) -> None:
    clients = _client(args).clients(args.client_id)
    if args.json:
        out.write(json.dumps(clients, indent=1) + "\n")
        return
    if args.command == "list":
        print_table(LIST_COLUMNS, [
            (c["client_instance_id"], c["client_id"],
             f"{c['client_software_name']} {c['client_software_version']}".strip() or "-",
             c["client_source_address"], str(c["push_interval_ms"]), str(c["pushes"]), str(len(c["metrics"])),
             c["last_error"]) for c in clients], out)
        return
    rows = []
    for c in clients:
        for m in sorted(c["metrics"], key=lambda m: (m["name"], sorted(m["attributes"].items()))):
            attrs = ",".join(f"{k}={v}" for k, v in sorted(m["attributes"].items()))
            rows.append((c["client_id"], c["client_instance_id"][:8], m["name"], attrs or "-", f"{m['value']:g}"))
    print_table(("CLIENT-ID", "INSTANCE", "METRIC", "ATTRIBUTES", "VALUE"), rows, out)


def main(argv: list[str]) -> int:
    return _report(run, build_parser().parse_args(argv))
