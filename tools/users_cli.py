"""`kcoord users`: SCRAM credentials, as Kafka's `kafka-configs --entity-type users` (over the wire:
DescribeUserScramCredentials / AlterUserScramCredentials) or `kafka-storage format --add-scram` (with
--log-dirs: written straight into a store no server is running on, e.g. the first super user before a
SASL-only broker starts).

  kcoord users list                                   every user and its mechanisms
  kcoord users add alice --password s3cret [--mechanism SCRAM-SHA-256] [--iterations 8192]
  kcoord users delete alice [--mechanism SCRAM-SHA-512]
"""
from __future__ import annotations

import argparse
import secrets
import sys

from kcoord.broker.security.scram import HASHES, MIN_ITERATIONS, make_credential, salted_password
from kcoord.metadata.scram_store import MECHANISM_TYPES, TYPE_OF, ScramStore
from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.tools.client_login import add_command_config, use_command_config
from kcoord.tools.tool_run import run_tool

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class UsersError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcoord users", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, help="a running kcoord (default %(default)s)")
    where.add_argument("--log-dirs", default=None, help="edit the store directly (no server may run on it)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser("list", help="every user and its SCRAM mechanisms")
    add = sub.add_parser("add", help="add or replace a user's credential")
    add.add_argument("user")
    add.add_argument("--password", required=True)
    add.add_argument("--mechanism", default="SCRAM-SHA-512", choices=sorted(HASHES))
    add.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    delete = sub.add_parser("delete", help="remove a user's credential")
    delete.add_argument("user")
    delete.add_argument("--mechanism", default="SCRAM-SHA-512", choices=sorted(HASHES))
    add_command_config(parser)
    return parser


def run_offline(args, out) -> None:
    store = ScramStore(args.log_dirs.split(",")[0])
    if args.command == "list":
        _print(store.users(), out)
    elif args.command == "add":
        store.apply([(args.user, args.mechanism, make_credential(args.mechanism, args.password, args.iterations))], [])
    elif store.get(args.user, args.mechanism) is None:
        raise UsersError(f"{args.user} has no {args.mechanism} credential")
    else:
        store.apply([], [(args.user, args.mechanism)])


def run_online(args, out) -> None:
    with KafkaWireClient.connect(args.bootstrap_server) as client:
        if args.command == "list":
            resp = client.request(m.DescribeUserScramCredentialsRequest(users=None), version=0)
            if resp.error_code:
                raise UsersError(f"DescribeUserScramCredentials failed: {ErrorCode(resp.error_code).name}")
            _print({r.user: {MECHANISM_TYPES[i.mechanism]: i.iterations for i in r.credential_infos}
                    for r in resp.results}, out)
            return
        R = m.AlterUserScramCredentialsRequest
        if args.command == "add":
            salt = secrets.token_bytes(32)
            request = R(deletions=[], upsertions=[R.ScramCredentialUpsertion(
                name=args.user, mechanism=TYPE_OF[args.mechanism], iterations=args.iterations, salt=salt,
                salted_password=salted_password(args.mechanism, args.password.encode(), salt, args.iterations))])
        else:
            request = R(upsertions=[], deletions=[R.ScramCredentialDeletion(name=args.user,
                                                                            mechanism=TYPE_OF[args.mechanism])])
        (result,) = client.request(request, version=0).results
        if result.error_code:
            raise UsersError(f"{ErrorCode(result.error_code).name}: {result.error_message or ''}".rstrip(": "))


def _print(users: dict[str, dict[str, int]], out) -> None:
    for user in sorted(users):
        mechs = ", ".join(f"{mech} (iterations={it})" for mech, it in sorted(users[user].items()))
        out.write(f"{user}\t{mechs}\n")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)

    def action() -> None:
        if args.log_dirs:
            run_offline(args, sys.stdout)
        else:
            use_command_config(args)
            run_online(args, sys.stdout)

    return run_tool(args.bootstrap_server, action, UsersError)


if __name__ == "__main__":
    sys.exit(main())
