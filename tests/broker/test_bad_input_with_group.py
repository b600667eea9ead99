"""Issue 6: bad input on some connections is answered or closed as Kafka would, and a consumer group
working on other connections at the same time sees nothing of it: no error, no rebalance beyond the
initial joins, every message consumed exactly once.

Two kafka-python group consumers run in their own processes (tests/broker/groups/workers); a thread
throws every kind of bad input at the server meanwhile: unknown api keys, unsupported versions,
truncated headers and bodies, frames that stop half-way and hang, absurd and negative sizes, and
random bytes from hypothesis.
"""
from __future__ import annotations

import re
import socket
import struct
import threading
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import encode_request_frame
from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.procs import disjoint_cover
from tests.broker.test_server import BAD_INPUTS
from tests.support.raw_kafka import RawKafka

TOPIC, GROUP, PARTITIONS, N = "bystander-topic", "bystander-group", 4, 300
OVERRIDES = {"group.initial.rebalance.delay.ms": "200", "group.min.session.timeout.ms": "1000"}
BOUND_S = 90.0

# A frame whose size promises more than is ever sent, left open: the server must keep serving others.
HANGING = {
    "half a header, then silence": struct.pack(">i", 40) + b"\x00\x03",
    "header, half a body, then silence": encode_request_frame(3, 12, 1, "x", b"\x00" * 30)[:-12],
}


class Barrage(threading.Thread):
    """Bad input, round after round, until stopped; counts rounds and keeps what went wrong."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True, name="barrage")
        self.port = port
        self.stop = threading.Event()
        self.rounds = 0
        self.failures: list[str] = []
        self.random_inputs = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.one_round()
                self.rounds += 1
        except Exception as exc:  # reported by the test, not lost in the thread
            self.failures.append(f"barrage crashed: {type(exc).__name__}: {exc}")

    def one_round(self) -> None:
        for name, data in BAD_INPUTS.items():  # each closes that connection, as Kafka does
            with RawKafka(self.port) as bad:
                bad.send_raw(data)
                if not bad.closed_by_peer():
                    self.failures.append(f"{name}: connection not closed")
        with RawKafka(self.port) as c:  # a too-new ApiVersions is answered (v0 body), not closed
            c.send_request(18, 9, body=b"\x05raw1\x021\x00")
            _cid, resp = c.read_response(18, 9, decode_version=0)
            if resp.error_code != ErrorCode.UNSUPPORTED_VERSION:
                self.failures.append(f"ApiVersions v9 answered {resp.error_code}")
        hanging = [socket.create_connection(("127.0.0.1", self.port), timeout=10) for _ in HANGING]
        try:
            for sock, data in zip(hanging, HANGING.values(), strict=True):
                sock.sendall(data)
            self.throw_random_bytes()
        finally:
            for sock in hanging:
                sock.close()

    def throw_random_bytes(self) -> None:
        @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(junk=st.binary(min_size=1, max_size=400))
        def throw(junk: bytes) -> None:
            with RawKafka(self.port) as fuzz:
                try:
                    fuzz.send_raw(junk)
                except OSError:  # the server may already have closed it: that is an allowed answer
                    pass
            self.random_inputs += 1

        throw()


def create_topic(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, keys: list[str]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        futures = [producer.send(TOPIC, key=k.encode(), value=b"v") for k in keys]
        for future in futures:
            future.get(BOUND_S)
    finally:
        producer.close(10)


def rebalances(log: str) -> list[str]:
    return re.findall(rf"Preparing to rebalance group {GROUP} .*", log)


def test_consumer_group_is_untouched_by_bad_input_on_other_connections(kcoord_server_factory):
    server = kcoord_server_factory(OVERRIDES)
    create_topic(server.bootstrap)
    consumers = [procs.python_consumer("kafka-python", server.bootstrap, GROUP, TOPIC, f"steady{i}")
                 for i in range(2)]
    barrage = Barrage(server.port)
    try:
        wait_until(lambda: disjoint_cover([c.assignment for c in consumers], PARTITIONS), BOUND_S,
                   "a stable group\n" + "\n".join(c.describe() for c in consumers))
        initial = rebalances(server.log_text())
        assignments = [c.assignment_count for c in consumers]

        barrage.start()
        keys = [f"k-{i}" for i in range(N)]
        for start in range(0, N, 50):  # in rounds, so consumption overlaps the barrage throughout
            produce(server.bootstrap, keys[start:start + 50])
            wait_until(lambda n=start + 50: sum(len(c.records()) for c in consumers) >= n, BOUND_S,
                       "consumption\n" + "\n".join(c.describe() for c in consumers))
        wait_until(lambda: barrage.rounds >= 2 or barrage.failures, BOUND_S, "two whole rounds of bad input")
        barrage.stop.set()
        barrage.join(BOUND_S)
        assert not barrage.is_alive()
        assert barrage.failures == []
        assert barrage.random_inputs >= 2 * 25

        got = Counter(k for c in consumers for _p, _o, k in c.records())
        assert got == Counter(keys), "every message exactly once"
        assert [c.errors() for c in consumers] == [[], []]
        assert [c.stderr_lines for c in consumers] == [[], []], "kafka-python logged no warning or error"
        assert all(c.alive for c in consumers)
        assert [c.assignment_count for c in consumers] == assignments, "no consumer saw a rebalance"
        log = server.log_text()
        assert rebalances(log) == initial, "the server started no rebalance after the initial joins"
        assert initial and all("reason: Adding new member steady" in line for line in initial), initial
        assert re.search(r"closing connection .*unknown api key", log)  # the bad input did arrive
    finally:
        barrage.stop.set()
        procs.stop_all(consumers)
