"""`kcoord demo`: the docker-compose scenario's client processes, and a health probe.

  kcoord demo ping     --bootstrap-server H:P                  ApiVersions round trip (container HEALTHCHECK)
  kcoord demo produce  --bootstrap-server H:P --topic T ...    keyed messages with kafka-python
  kcoord demo consume  --bootstrap-server H:P --topic T --group G ...
                                                               a group consumer that commits; prints one
                                                               JSON line per message so a test can check
                                                               exactly-once delivery across the group
The clients are real kafka-python clients: this is what a user's application looks like against kcoord.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import sys
import time

API_VERSIONS_V0 = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


def ping(bootstrap: str, timeout: float = 3.0) -> bool:
    """True when the server answers ApiVersions v0 with error NONE."""
    host, _, port = bootstrap.rpartition(":")
    client_id = b"kcoord-ping"
    request = API_VERSIONS_V0.pack(18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        header = _recv_exactly(sock, 4)
        (size,) = struct.unpack(">i", header)
        body = _recv_exactly(sock, size)
    correlation_id, error_code = struct.unpack_from(">ih", body)
    return correlation_id == 1 and error_code == 0


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("server closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def wait_for_server(bootstrap: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if ping(bootstrap):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"kcoord demo: no server answering at {bootstrap} after {timeout_s:.0f}s")
        time.sleep(0.5)


def produce(args: argparse.Namespace) -> int:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    wait_for_server(args.bootstrap_server, args.wait)
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_server, client_id="kcoord-demo-admin")
    try:
        admin.create_topics([NewTopic(args.topic, args.partitions, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=args.bootstrap_server, client_id="kcoord-demo-producer",
                             acks="all", linger_ms=5)
    interval = 1.0 / args.rate if args.rate > 0 else 0.0
    for i in range(args.count):
        key = f"key-{i % args.keys}".encode()
        producer.send(args.topic, key=key, value=f"message-{i}".encode())
        if interval:
            time.sleep(interval)
    producer.flush()
    producer.close()
    print(json.dumps({"produced": args.count, "topic": args.topic}), flush=True)
    return 0


def consume(args: argparse.Namespace) -> int:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import CommitFailedError

    class ReportAssignment(ConsumerRebalanceListener):
        # One JSON line on stderr per assignment, so a watcher knows when the group has settled.
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            print(json.dumps({"client_id": args.client_id,
                              "assigned": sorted([tp.topic, tp.partition] for tp in assigned)}),
                  file=sys.stderr, flush=True)

    wait_for_server(args.bootstrap_server, args.wait)
    stop = False

    def on_signal(signum, frame):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap_server, group_id=args.group,
        client_id=args.client_id, auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=max(args.session_timeout_ms // 5, 100))
    consumer.subscribe([args.topic], listener=ReportAssignment())
    seen = 0
    idle_since = time.monotonic()
    try:
        while not stop and (args.max_messages <= 0 or seen < args.max_messages):
            batches = consumer.poll(timeout_ms=200)
            if not batches:
                if args.idle_timeout > 0 and time.monotonic() - idle_since > args.idle_timeout:
                    break
                continue
            idle_since = time.monotonic()
            for tp, records in batches.items():
                for record in records:
                    print(json.dumps({"topic": tp.topic, "partition": tp.partition, "offset": record.offset,
                                      "key": record.key.decode() if record.key else None,
                                      "value": record.value.decode() if record.value else None}), flush=True)
                    seen += 1
            try:
                consumer.commit()
            except CommitFailedError as exc:
                # The group rebalanced under us: the uncommitted tail will be redelivered to the new owner.
                print(json.dumps({"client_id": args.client_id, "commit_failed": str(exc)}), file=sys.stderr,
                      flush=True)
    finally:
        consumer.close()
    print(json.dumps({"consumed": seen, "client_id": args.client_id}), file=sys.stderr, flush=True)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kcoord demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("ping", "produce", "consume"):
        p = sub.add_parser(name)
        p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
        p.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the server to answer")
        if name == "ping":
            continue
        p.add_argument("--topic", default="demo")
        if name == "produce":
            p.add_argument("--partitions", type=int, default=6)
            p.add_argument("--count", type=int, default=1000)
            p.add_argument("--keys", type=int, default=100, help="distinct keys")
            p.add_argument("--rate", type=float, default=0, help="messages per second; 0 = as fast as possible")
        else:
            p.add_argument("--group", default="demo-group")
            p.add_argument("--client-id", default="kcoord-demo-consumer")
            p.add_argument("--max-messages", type=int, default=0, help="stop after this many; 0 = no limit")
            p.add_argument("--idle-timeout", type=float, default=0, help="stop after this many idle seconds")
            p.add_argument("--session-timeout-ms", type=int, default=10000)
    args = parser.parse_args(argv)
    if args.command == "ping":
        try:
            ok = ping(args.bootstrap_server)
        except OSError as exc:
            print(f"kcoord demo ping: {exc}", file=sys.stderr)
            return 1
        return 0 if ok else 1
    return produce(args) if args.command == "produce" else consume(args)
