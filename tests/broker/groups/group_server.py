"""The group integration tests' broker: one from the test kit's launcher (kcoord.testkit.pytest_plugin.
start_broker), with group timeouts small enough that membership changes settle in seconds, plus the few
things the tests ask of it (topics, keyed messages, log-end and committed offsets, restarts, a failing
write). BrokerProcess.start returns once __consumer_offsets is loaded (the admin endpoint's /health):
raw-protocol tests send exactly one JoinGroup where a real client would retry COORDINATOR_LOAD_IN_PROGRESS."""
from __future__ import annotations

import signal

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.testkit.broker_process import BrokerProcess
from kcoord.testkit.pytest_plugin import start_broker
from kcoord.testkit.waiting import wait_until
from kcoord.tools import groups_cli

GROUP_TEST_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "1000",
}


def start_group_server(workdir, overrides: dict[str, str] | None = None, name: str = "groups",
                       **kwargs) -> GroupTestServer:
    """A GroupTestServer with GROUP_TEST_OVERRIDES under `overrides`, started; the caller stops it."""
    return start_broker(workdir, {**GROUP_TEST_OVERRIDES, **(overrides or {})}, name, cls=GroupTestServer, **kwargs)


class GroupTestServer(BrokerProcess):
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

    def restart(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> GroupTestServer:  # type: ignore[override]
        """Stop gracefully (SIGTERM) or crash (SIGKILL), then start on the same port and data."""
        if sig == signal.SIGKILL:
            self.kill(restart=False)
        else:
            self.stop()
        return self.start(timeout)
