"""Servers for the group integration tests: the real server subprocess (tests/support), with group
timeouts small enough that membership changes settle in seconds, plus the few things the tests ask
of a server (topics, keyed messages, log-end and committed offsets, restarts, a failing write)."""
from __future__ import annotations

import signal

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.coordinator.runtime import FAULT_FILE_ENV
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.tools import groups_cli
from kcoord.tools.client import KafkaWireClient
from tests.broker.groups.procs import wait_until
from tests.support.kcoord_server import KcoordServer

GROUP_TEST_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "1000",
}


class GroupTestServer(KcoordServer):
    fault_file = None

    def start(self, timeout: float = 30.0) -> GroupTestServer:
        """Start, then wait until every __consumer_offsets partition is loaded: raw-protocol tests send
        exactly one JoinGroup where a real client would retry COORDINATOR_LOAD_IN_PROGRESS."""
        super().start(timeout)

        def loaded():
            with KafkaWireClient.connect(self.bootstrap) as client:
                error = client.request(m.ListGroupsRequest(), 4).error_code
            return None if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else (error,)

        wait_until(loaded, timeout, "__consumer_offsets loaded")
        return self

    def create_topic(self, topic: str, partitions: int) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="kcoord-test-admin")
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])
        finally:
            admin.close()

    def produce_keyed(self, topic: str, count: int, prefix: str = "k-") -> list[str]:
        """`count` messages keyed prefix0..; returns the keys once all are acknowledged."""
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5,
                                 client_id="kcoord-test-producer")
        try:
            keys = [f"{prefix}{i}" for i in range(count)]
            futures = [producer.send(topic, key=k.encode(), value=f"value of {k}".encode()) for k in keys]
            producer.flush(30)
            for future in futures:
                future.get(30)
            return keys
        finally:
            producer.close(10)

    def end_offsets(self, topic: str, partitions: int) -> dict[int, int]:
        with KafkaWireClient.connect(self.bootstrap) as client:
            ends = groups_cli.list_offsets(client, [(topic, p) for p in range(partitions)], groups_cli.LATEST)
        return {p: o for (_t, p), o in ends.items()}

    def committed_offsets(self, group: str, topic: str, partitions: int) -> dict[int, int]:
        """The group's committed offsets, retrying (as clients do) while the server is still loading."""

        def fetch():
            try:
                with KafkaWireClient.connect(self.bootstrap) as client:
                    return (groups_cli.committed_offsets(client, group),)
            except groups_cli.GroupsError as exc:
                if ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.name in str(exc):
                    return None
                raise

        (committed,) = wait_until(fetch, 30, f"offsets of {group} loaded")
        return {p: o for (t, p), o in committed.items() if t == topic and p < partitions}

    def restart(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> KcoordServer:
        """Stop gracefully (SIGTERM) or crash (SIGKILL), then start on the same port and data."""
        if sig == signal.SIGKILL:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def fail_next_offsets_write(self) -> None:
        self.fault_file.write_text("fail")


def _server(workdir, name: str) -> GroupTestServer:
    return GroupTestServer(workdir, dict(GROUP_TEST_OVERRIDES), name=name)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server per test module (tests use their own group and topic names)."""
    srv = _server(tmp_path_factory.mktemp("groups"), "groups").start()
    yield srv
    srv.stop()


@pytest.fixture
def restartable_server(tmp_path):
    srv = _server(tmp_path, "restartable").start()
    yield srv
    srv.stop()


@pytest.fixture
def faulty_server(tmp_path, monkeypatch):
    """A server whose next `__consumer_offsets` write fails whenever the test asks."""
    srv = _server(tmp_path, "faulty")
    srv.fault_file = tmp_path / "fail-next-offsets-write"
    monkeypatch.setenv(FAULT_FILE_ENV, str(srv.fault_file))
    srv.start()
    yield srv
    srv.stop()
