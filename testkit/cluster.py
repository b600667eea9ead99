"""A kcoord cluster as child processes: one etcd and N `kcoord serve` nodes on loopback (issue #26).

    cluster = KafkaCluster(workdir, nodes=3).start()   # returns once every node is registered
    cluster.bootstrap_servers                          # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
    cluster.leader_of("events", 0)                     # node id, from Metadata
    cluster.kill(2); cluster.restart(2)                # SIGKILL; start again on its data and port
    cluster.pause(3); cluster.resume(3)                # SIGSTOP / SIGCONT (past the session: lease lost)
    cluster.wait_leader("events", 0, not_on=2)         # until a leader other than node 2
    cluster.wait_isr("events", 0, 3)                   # until the ISR has 3 members
    cluster.data_dir(2)                                # node 2's log.dirs
    cluster.coordinator_of("g")                        # the group's coordinator (FindCoordinator), a node id
    cluster.move_coordinator("g", to=3)                # ElectLeaders on its __consumer_offsets partition
    cluster.stop()                                     # SIGTERM every node (controlled shutdown), then etcd

    cluster = KafkaCluster(workdir, nodes=3, links=True)   # links that can be cut (kcoord.testkit.links)
    cluster.cut(2)                                     # node 2 cut off from etcd and from every other node
    cluster.cut(2, from_etcd=False, from_nodes={3})    # only the link between nodes 2 and 3
    cluster.cut(2, mode="reset")                       # connections reset instead of blackholed
    cluster.heal(2)                                    # every cut involving node 2 lifted

With `links=True` node N listens on its own loopback address 127.0.0.(N+1): clients reach it directly on
its PLAINTEXT listener (never cut), its etcd connection goes through a proxy of its own, and other nodes
replicate from it through a proxy in front of its REPLICATION listener (its first advertised listener,
the one followers use), which tells nodes apart by their source address.

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
from concurrent.futures import ThreadPoolExecutor

from kcoord.testkit.broker_process import TEST_SETTINGS, BrokerProcess
from kcoord.testkit.etcd import EtcdProcess, free_port
from kcoord.testkit.links import ANY, BLACKHOLE, LinkProxies, LinkProxy


class ClusterFailed(RuntimeError):
    pass


class KafkaCluster:
    def __init__(self, workdir: str | os.PathLike, nodes: int = 3, overrides: dict[str, object] | None = None,
                 *, session_timeout_ms: int = 9000, test_settings: bool = True, log_level: str = "INFO",
                 links: bool = False) -> None:
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
        self.links: LinkProxies | None = LinkProxies() if links else None
        self._etcd_links: dict[int, LinkProxy] = {}
        self._node_links: dict[int, LinkProxy] = {}
        self.disturbed = False  # a fault was injected (kill, restart, pause, cut): not as started
        if links:
            for i, node in self.nodes.items():
                node.host = f"127.0.0.{i + 1}"

    def _start_links(self) -> bool:
        """Start the proxies and give each node its listeners (False: no links, nothing to do)."""
        if self.links is None:
            return False
        self.links.start()
        for i, node in self.nodes.items():
            port, replication = free_port(node.host), free_port(node.host)
            node.port = port
            self._etcd_links[i] = self.links.add(f"etcd<-node{i}", node.host, (self.etcd.host, self.etcd.client_port))
            self._node_links[i] = self.links.add(f"node{i}", node.host, (node.host, replication))
            node.overrides.update({
                "listeners": f"PLAINTEXT://{node.host}:{port},REPLICATION://{node.host}:{replication}",
                "advertised.listeners": f"REPLICATION://{self._node_links[i].address},PLAINTEXT://{node.host}:{port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
                "kcoord.etcd.connect": self._etcd_links[i].address + self.prefix})
        return True

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> KafkaCluster:
        self.etcd.start()
        connect = self.etcd.connect + self.prefix
        deadline = time.monotonic() + timeout
        try:
            linked = self._start_links()
            for node in self.nodes.values():
                if not linked:
                    node.overrides["kcoord.etcd.connect"] = connect
            # all at once, each start waiting for its own node's ready line: a cluster is up in about one
            # node's start time, not the sum (which node wins the controller lease was never fixed)
            with ThreadPoolExecutor(len(self.nodes)) as pool:
                starts = [pool.submit(node.start, max(1.0, deadline - time.monotonic())) for node in self.nodes.values()]
                for start in starts:
                    start.result()
            # through every node: each follows the registrations on its own, so a test may ask any of them
            for node_id in self.nodes:
                self.wait_registered(set(self.nodes), max(1.0, deadline - time.monotonic()), via=node_id)
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
        if self.links is not None:
            for proxy in [*self._etcd_links.values(), *self._node_links.values()]:
                self.links.heal(proxy)  # a cut node can still hand its leaderships over
        for node in self.nodes.values():
            node.stop(timeout=30)
        self.etcd.stop()
        if self.links is not None:
            self.links.close()

    def kill(self, node_id: int) -> None:
        """SIGKILL: the node's lease expires a session timeout later and its partitions fail over."""
        self.disturbed = True
        self.nodes[node_id].kill(restart=False)

    def restart(self, node_id: int, timeout: float = 30.0) -> None:
        """Start a stopped or killed node again, on its data directory and port."""
        self.disturbed = True
        node = self.nodes[node_id]
        if node.running:
            node.stop()
        node.start(timeout)

    def pause(self, node_id: int) -> None:
        self.disturbed = True
        self._signal(self.nodes[node_id], signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        self._signal(self.nodes[node_id], signal.SIGCONT)

    def cut(self, node_id: int, from_etcd: bool = True, from_nodes: bool | set[int] = True,
            mode: str = BLACKHOLE) -> None:
        """Cut node `node_id` off from etcd and/or from other nodes (all of them, or the ids given), its
        clients untouched. `mode`: "blackhole" (bytes stop, nothing tells either side: a partition) or
        "reset" (connections reset, new ones refused). Needs KafkaCluster(..., links=True)."""
        self.disturbed = True
        links = self._require_links()
        if from_etcd:
            links.cut(self._etcd_links[node_id], [ANY], mode)
        others = set(self.nodes) - {node_id} if from_nodes is True else set(from_nodes or ())
        if from_nodes is True:
            links.cut(self._node_links[node_id], [ANY], mode)  # every node, and anything else inter-node
        elif others:
            links.cut(self._node_links[node_id], [self.nodes[o].host for o in others], mode)
        for other in others:
            links.cut(self._node_links[other], [self.nodes[node_id].host], mode)

    def heal(self, node_id: int) -> None:
        """Lift every cut involving node `node_id` (its etcd link, its links with each other node)."""
        links = self._require_links()
        links.heal(self._etcd_links[node_id])
        links.heal(self._node_links[node_id])
        for other in set(self.nodes) - {node_id}:
            links.heal(self._node_links[other], [self.nodes[node_id].host])

    def _require_links(self) -> LinkProxies:
        if self.links is None:
            raise ClusterFailed("links cannot be cut: start the cluster with KafkaCluster(..., links=True) "
                                "(the kafka_cluster fixture: @pytest.mark.kcoord_cluster(links=True))")
        return self.links

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

    # -- coordinators (issue #27): the group coordinator is the leader of the group's __consumer_offsets partition
    def coordinator_of(self, group_id: str, timeout: float = 30.0, via: int | None = None) -> int:
        """The node FindCoordinator (v3, through `via` or any running node) names for `group_id`, once it
        names one (COORDINATOR_NOT_AVAILABLE, a failover in progress, is waited out)."""
        from kcoord.protocol import messages as m
        from kcoord.protocol.client import KafkaWireClient

        def find() -> int:
            node = self.nodes[via] if via is not None else next(n for n in self.nodes.values() if n.running)
            with KafkaWireClient.connect(node.bootstrap_servers, timeout=5) as client:
                answer = client.request(m.FindCoordinatorRequest(key=group_id, key_type=0), version=3)
            return answer.node_id if answer.error_code == 0 else -1

        return self._poll(find, lambda node_id: node_id >= 0, timeout, f"the coordinator of group {group_id}")

    def coordinator_partition(self, group_id: str) -> int:
        """The group's partition of __consumer_offsets (Kafka's hash over offsets.topic.num.partitions)."""
        from kcoord.protocol.consumer_offsets import partition_for

        return partition_for(group_id, int(self.settings.get("offsets.topic.num.partitions", 50)))

    def move_coordinator(self, group_id: str, to: int, timeout: float = 30.0) -> None:
        """Make node `to` the group's coordinator: its partition's replicas reordered with `to` first
        (AlterPartitionReassignments), then a PREFERRED ElectLeaders, both sent to the controller; returns
        once FindCoordinator names `to`."""
        from kcoord.protocol import messages as m
        from kcoord.protocol.client import KafkaWireClient

        topic, index = "__consumer_offsets", self.coordinator_partition(group_id)
        replicas = list(self.partition(topic, index).replica_nodes)
        if to not in replicas:
            raise ValueError(f"node {to} holds no replica of {topic}-{index} ({replicas})")
        order = [to] + [r for r in replicas if r != to]
        controller = self.metadata().controller_id
        R = m.AlterPartitionReassignmentsRequest
        with KafkaWireClient.connect(self.nodes[controller].bootstrap_servers, timeout=10) as client:
            answer = client.request(R(timeout_ms=10_000, topics=[R.ReassignableTopic(
                name=topic, partitions=[R.ReassignablePartition(partition_index=index, replicas=order)])]), version=0)
            if answer.error_code:
                raise ClusterFailed(f"reordering {topic}-{index}: error {answer.error_code}")
        self._poll(lambda: list(self.partition(topic, index).replica_nodes), lambda r: r == order, timeout,
                   f"{topic}-{index}: replicas")
        E = m.ElectLeadersRequest
        with KafkaWireClient.connect(self.nodes[controller].bootstrap_servers, timeout=10) as client:
            client.request(E(election_type=0, timeout_ms=10_000,
                             topic_partitions=[E.TopicPartitions(topic=topic, partitions=[index])]), version=1)
        self._poll(lambda: self.coordinator_of(group_id, timeout), lambda node_id: node_id == to, timeout,
                   f"the coordinator of group {group_id}")

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
