"""`kcoord cluster up --nodes 3 [--dir DIR]`: a cluster on this machine, in the foreground.

The test kit's KafkaCluster, as a command: tools/cli.py runs it in its own interpreter
(`python -m kcoord.testkit.cluster_up up ...`), so the tools never import the test kit.

Starts one etcd (Debian's etcd-server) and N `kcoord serve` nodes on loopback, on free ports, node ids
1..N, each with its own data directory under DIR (default: a new temporary directory); waits until all
are registered, prints the bootstrap list, and runs until Ctrl-C (or SIGTERM), then stops the nodes with
SIGTERM (controlled shutdown) and etcd. Settings are Kafka's defaults (--override KEY=VALUE for every
node), so __consumer_offsets has replication factor 3: run at least 3 nodes to use consumer groups.
"""
from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kcoord cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    up = sub.add_parser("up", help="start etcd and N nodes on loopback; Ctrl-C stops them")
    up.add_argument("--nodes", type=int, default=3, help="how many kcoord nodes (default 3)")
    up.add_argument("--dir", help="where data and logs go (default: a new temporary directory)")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a property for every node (repeatable)")
    up.add_argument("--session-timeout-ms", type=int, default=9000,
                    help="kcoord.etcd.session.timeout.ms of the nodes (default 9000)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    from kcoord.broker.config import ConfigError, parse_overrides
    from kcoord.testkit.broker_process import BrokerFailed
    from kcoord.testkit.cluster import ClusterFailed, KafkaCluster
    from kcoord.testkit.etcd import EtcdFailed

    try:
        overrides = parse_overrides(args.override)
    except ConfigError as exc:
        print(f"kcoord cluster: {exc}", file=sys.stderr)
        return 2
    workdir = args.dir or tempfile.mkdtemp(prefix="kcoord-cluster-")
    cluster = KafkaCluster(workdir, args.nodes, overrides, session_timeout_ms=args.session_timeout_ms,
                           test_settings=False)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"starting etcd and {args.nodes} node(s) in {workdir} ...", flush=True)
    try:
        cluster.start()
    except (BrokerFailed, ClusterFailed, EtcdFailed) as exc:
        print(f"kcoord cluster: {exc}", file=sys.stderr)
        return 1
    print(f"etcd: {cluster.connect}  (kcoord.etcd.connect)")
    for node_id, node in cluster.nodes.items():
        print(f"node {node_id}: {node.bootstrap_servers}  admin {node.admin_url}  log {node.log_path}")
    print(f"bootstrap servers: {cluster.bootstrap_servers}", flush=True)
    print("Ctrl-C stops the cluster.", flush=True)
    while not stop.wait(0.5):
        pass
    print("stopping (controlled shutdown) ...", flush=True)
    cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
