"""A kcoord cluster as child processes: one etcd and N `kcoord serve` nodes on loopback (issue #26).

    cluster = KafkaCluster(workdir, nodes=3).start()   # returns once every node is registered
    cluster.bootstrap_servers                          # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
    cluster.leader_of("events", 0)                     # node id, from Metadata
    cluster.kill(2); cluster.restart(2)                # SIGKILL; start again on its data and port
    cluster.pause(3); cluster.resume(3)                # SIGSTOP / SIGCONT (past the session: lease lost)
    cluster.wait_leader("events", 0, not_on=2)         # until a leader other than node 2
    cluster.wait_isr("events", 0, 3)                   # until the ISR has 3 members
    cluster.data_dir(2)                                # node 2's log.dirs
    cluster.stop()                                     # SIGTERM every node (controlled shutdown), then etcd

Nodes are numbered 1..N (their node.id); each has its own data directory under `workdir` and its admin
endpoint on. `session_timeout_ms` is kcoord.etcd.session.timeout.ms (etcd grants at least ~2 s). Used
by `kcoord cluster up` and by the `kafka_cluster` pytest fixture (kcoord.testkit.cluster_plugin).
"""
from __future__ import annotations

import os
import pathlib
import signal
import time
import uuid

from kcoord.testkit.broker_process import TEST_SETTINGS, BrokerProcess
from kcoord.testkit.etcd import EtcdProcess


class ClusterFailed(RuntimeError):
    pass


class KafkaCluster:
    def __init__(self, workdir: str | os.PathLike, nodes: int = 3, overrides: dict[str, object] | None = None,
                 *, session_timeout_ms: int = 9000, test_settings: bool = True, log_level: str = "INFO") -> None:
        self.workdir = pathlib.Path(workdir)
        self.etcd = EtcdProcess(self.workdir)
        self.prefix = f"/kcoord/{uuid.uuid4().hex[:12]}"
        settings = {**(TEST_SETTINGS if test_settings else {}),
                    "kcoord.etcd.session.timeout.ms": str(session_timeout_ms),
                    **{k: str(v) for k, v in (overrides or {}).items()}}
        self.settings = settings
        self.nodes: dict[int, BrokerProcess] = {
            i: BrokerProcess(self.workdir, {**settings, "node.id": str(i)}, name=f"node{i}", log_level=log_level,
                             test_settings=False)
            for i in range(1, nodes + 1)}

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> KafkaCluster:
        self.etcd.start()
        connect = self.etcd.connect + self.prefix
        deadline = time.monotonic() + timeout
        try:
            for node in self.nodes.values():
                node.overrides["kcoord.etcd.connect"] = connect
                node.start(max(1.0, deadline - time.monotonic()))
            self.wait_registered(set(self.nodes), max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM every node (controlled shutdown), then stop etcd and remove its data."""
        for node in self.nodes.values():
            if node.pid is not None:
                self._signal(node, signal.SIGCONT)
            if node.running:
                os.kill(node.pid, signal.SIGTERM)  # all at once: each waits for its leaderships to move
        for node in self.nodes.values():
            node.stop(timeout=30)
        self.etcd.stop()

    def kill(self, node_id: int) -> None:
        """SIGKILL: the node's lease expires a session timeout later and its partitions fail over."""
        self.nodes[node_id].kill(restart=False)

    def restart(self, node_id: int, timeout: float = 30.0) -> None:
        """Start a stopped or killed node again, on its data directory and port."""
        node = self.nodes[node_id]
        if node.running:
            node.stop()
        node.start(timeout)

    def pause(self, node_id: int) -> None:
        self._signal(self.nodes[node_id], signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self._signal(self.nodes[node_id], signal.SIGCONT)

    @staticmethod
    def _signal(node: BrokerProcess, sig: signal.Signals) -> None:
        if node.pid is not None:
            try:
                os.kill(node.pid, sig)
            except ProcessLookupError:
                pass

    # -- what tests and tools read -----------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.bootstrap_servers for node in self.nodes.values())

    @property
    def connect(self) -> str:
        """The kcoord.etcd.connect value of this cluster."""
        return self.etcd.connect + self.prefix

    def metadata(self, via: int | None = None, topics: list[str] | None = None):
        """A Metadata v12 response from node `via` (default: the first running node)."""
        from kcoord.protocol import messages as m
        from kcoord.protocol.client import KafkaWireClient

        node = self.nodes[via] if via is not None else next(n for n in self.nodes.values() if n.running)
        request = m.MetadataRequest(
            topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        with KafkaWireClient.connect(node.bootstrap_servers, timeout=10) as client:
            return client.request(request, version=12)

    def leader_of(self, topic: str, partition: int, via: int | None = None) -> int:
        """The partition's leader as Metadata answers it (-1: none)."""
        for t in self.metadata(via, [topic]).topics:
            for p in t.partitions:
                if p.partition_index == partition:
                    return p.leader_id
        raise KeyError(f"{topic}-{partition} is not in Metadata")

    def data_dir(self, node_id: int) -> pathlib.Path:
        """Node `node_id`'s log.dirs (its partitions are `<topic>-<partition>` directories in it)."""
        return self.nodes[node_id].data_dir

    def partition(self, topic: str, partition: int, via: int | None = None):
        """The partition's Metadata entry (leader_id, leader_epoch, replica_nodes, isr_nodes, ...)."""
        for t in self.metadata(via, [topic]).topics:
            for p in t.partitions:
                if p.partition_index == partition:
                    return p
        raise KeyError(f"{topic}-{partition} is not in Metadata")

    def wait_leader(self, topic: str, partition: int, *, not_on: int | None = None, timeout: float = 30.0,
                    via: int | None = None) -> int:
        """Until the partition has a leader (other than `not_on`); returns it."""
        return self._poll(lambda: self.leader_of(topic, partition, via), lambda leader: leader >= 0 and leader != not_on,
                          timeout, f"{topic}-{partition}: leader")

    def wait_isr(self, topic: str, partition: int, size: int, timeout: float = 30.0, via: int | None = None) -> list[int]:
        """Until the partition's ISR has `size` members (as Metadata answers it); returns the ISR."""
        return self._poll(lambda: list(self.partition(topic, partition, via).isr_nodes), lambda isr: len(isr) == size,
                          timeout, f"{topic}-{partition}: ISR (expected {size} members)")

    @staticmethod
    def _poll(read, done, timeout: float, what: str):
        """read() every 50 ms until done(value) (a failed read counts as not done); returns that value."""
        deadline = time.monotonic() + timeout
        value = None
        while True:
            try:
                value = read()
                if done(value):
                    return value
            except (OSError, KeyError, StopIteration):
                pass
            if time.monotonic() > deadline:
                raise ClusterFailed(f"{what} {value} after {timeout} s")
            time.sleep(0.05)

    def wait_registered(self, node_ids: set[int], timeout: float = 30.0, via: int | None = None) -> None:
        """Until Metadata lists exactly `node_ids` as the cluster's brokers."""
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while True:
            try:
                seen = {b.node_id for b in self.metadata(via).brokers}
                if seen == node_ids:
                    return
            except (OSError, StopIteration):
                pass
            if time.monotonic() > deadline:
                raise ClusterFailed(f"brokers {sorted(seen)} registered, expected {sorted(node_ids)}")
            time.sleep(0.05)

    # -- the transaction coordinator (issue #27) -------------------------------------------------------
    def txn_coordinator_of(self, transactional_id: str, *, not_on: int | None = None, timeout: float = 30.0,
                           via: int | None = None) -> int:
        """The node coordinating `transactional_id` (the leader of its `__transaction_state` partition) as
        FindCoordinator answers it, waiting while it answers an error (no leader yet, topic being created)
        or names `not_on` (a node just killed, until its partitions fail over)."""
        from kcoord.protocol import messages as m
        from kcoord.protocol.client import KafkaWireClient

        def find() -> int:
            node = self.nodes[via] if via is not None else next(n for n in self.nodes.values() if n.running)
            with KafkaWireClient.connect(node.bootstrap_servers, timeout=10) as client:
                found = client.request(m.FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id]),
                                       version=4).coordinators[0]
            return found.node_id if found.error_code == 0 else -1

        return self._poll(find, lambda node_id: node_id >= 0 and node_id != not_on, timeout,
                          f"transaction coordinator of {transactional_id}")

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
