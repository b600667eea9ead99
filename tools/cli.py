"""`kcoord` command line: serve, config, groups, faults, analyze.

Each subcommand imports what it needs only when it runs, so `kcoord --help` stays instant.
`analyze` runs the PySpark pipeline in its own interpreter (`python -m kcoord.analytics`): the broker never
imports analytics, and Spark's JVM never shares a process with a server.
"""

from __future__ import annotations

import argparse
import os
import sys

from kcoord.broker.config import ConfigError

EPILOG = """\
examples:
  kcoord serve                                   start on 127.0.0.1:9092, data in ./data
  kcoord serve server.properties --override group.initial.rebalance.delay.ms=0
  kcoord config --override num.partitions=6      print the effective configuration
  kcoord groups list                             list consumer groups of a running server
  kcoord groups describe my-group                members, offsets and lag of a group
  kcoord users add alice --password s3cret       a SCRAM-SHA-512 credential (users list / delete)
  kcoord faults add --api Heartbeat --error REBALANCE_IN_PROGRESS --count 3 --admin http://127.0.0.1:8083
  kcoord groups expire-member my-group MEMBER --admin http://127.0.0.1:8083
  kcoord analyze all --log-dirs ./data           tables + HTML report from the store (PySpark)
  kcoord demo ping --bootstrap-server 127.0.0.1:9092   is a server answering ApiVersions?
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kcoord",
        description="kcoord: a Kafka-wire-protocol broker built around a faithful consumer-group coordinator.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser(
        "serve", help="run the broker in the foreground until Ctrl-C / SIGTERM",
        description="Run the broker in the foreground. Configuration uses Kafka's property names "
                    "(listeners, advertised.listeners, log.dirs, node.id, group.*, offsets.*); with no file "
                    "the embedded defaults apply: 127.0.0.1:9092, data in ./data. Ctrl-C or SIGTERM stops "
                    "it gracefully (in-flight requests finish, storage is flushed and fsynced).")
    _add_config_args(serve)
    serve.add_argument("--log-level", default=os.environ.get("KCOORD_LOG_LEVEL", "INFO"),
                       help="DEBUG, INFO (default), WARNING or ERROR")

    config = sub.add_parser(
        "config", help="print the effective configuration and exit",
        description="Print every property kcoord honours with its effective value (after the file and "
                    "overrides) and what it does.")
    _add_config_args(config)

    sub.add_parser(
        "groups", help="list / describe / delete consumer groups, reset offsets (talks to a running server)",
        description="Consumer-group tool built on the server's own admin APIs; see `kcoord groups --help`.",
        add_help=False)

    sub.add_parser(
        "users", help="list / add / delete SCRAM credentials (a running server, or --log-dirs offline)",
        description="See `kcoord users --help`.", add_help=False)

    sub.add_parser(
        "faults", help="inject faults into a running server (its admin endpoint: kcoord.admin.listener)",
        description="See `kcoord faults --help`.", add_help=False)

    sub.add_parser(
        "clients", help="client instances and the metrics they push (KIP-714; the server's admin endpoint)",
        description="See `kcoord clients --help`.", add_help=False)

    sub.add_parser(
        "demo", help="the compose scenario's clients: ping | produce | consume (kafka-python)",
        description="See `kcoord demo --help`.", add_help=False)

    sub.add_parser(
        "analyze", help="PySpark pipeline: ingest | report | health | all over a store's segments",
        description="Runs `python -m kcoord.analytics`; see `kcoord analyze --help`.", add_help=False)
    return parser


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("properties", nargs="?", help="a server.properties file (optional)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set a property, overriding the file (repeatable)")


def load_config(args: argparse.Namespace):
    from kcoord.broker.config import BrokerConfig, parse_overrides

    return BrokerConfig.load(args.properties, parse_overrides(args.override))


def cmd_serve(args: argparse.Namespace) -> int:
    from kcoord.broker.config import parse_overrides
    from kcoord.broker.run import serve_properties

    return serve_properties(args.properties, parse_overrides(args.override), args.log_level)


def cmd_config(args: argparse.Namespace) -> int:
    from kcoord.broker.security.listener_config import SENSITIVE

    cfg = load_config(args)
    for name, value, doc in cfg.describe():
        shown = ",".join(str(v) for v in value) if isinstance(value, list) else value
        if isinstance(value, dict):  # max.connections.per.ip.overrides, as it is written
            shown = ",".join(f"{k}:{v}" for k, v in value.items())
        if name in SENSITIVE and value is not None:
            shown = "[hidden]"
        print(f"{name}={'' if shown is None else shown}    # {doc}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # `groups` and `analyze` own their argument parsing.
    if argv and argv[0] == "groups":
        from kcoord.tools.groups_cli import main as groups_main

        return groups_main(argv[1:])
    if argv and argv[0] == "users":
        from kcoord.tools.users_cli import main as users_main

        return users_main(argv[1:])
    if argv and argv[0] == "faults":
        from kcoord.tools.admin_cli import faults_main

        return faults_main(argv[1:])
    if argv and argv[0] == "clients":
        from kcoord.tools.clients_cli import main as clients_main

        return clients_main(argv[1:])
    if argv and argv[0] == "demo":
        from kcoord.tools.demo import main as demo_main

        return demo_main(argv[1:])
    if argv and argv[0] == "cluster":  # `kcoord cluster up`: etcd + N nodes on loopback (the test kit's)
        os.execv(sys.executable, [sys.executable, "-m", "kcoord.testkit.cluster_up", *argv[1:]])
    if argv and argv[0] == "analyze":
        os.execv(sys.executable, [sys.executable, "-m", "kcoord.analytics", *argv[1:]])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "serve":
            return cmd_serve(args)
        return cmd_config(args)
    except ConfigError as exc:
        print(f"kcoord: configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
