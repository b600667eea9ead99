"""The group coordinator follows `__consumer_offsets` leadership (issue #27), end to end: 3 nodes + etcd,
`offsets.topic.replication.factor=3`, real clients in their own processes (tests/broker/groups/workers),
real SIGKILL / SIGSTOP of the coordinator's node.

Kafka's behaviour followed: the coordinator of a group is the leader of its __consumer_offsets partition
(KafkaApis.handleFindCoordinatorRequest), a new leader loads the shard (GroupCoordinatorService.onElection ->
CoordinatorRuntime.scheduleLoadOperation) and restarts its members' session timers
(GroupMetadataManager.onLoaded), a node that lost the partition answers NOT_COORDINATOR
(CoordinatorRuntime.scheduleWriteOperation on an unloaded shard), and a commit is acknowledged only once
the in-sync replicas hold it (CoordinatorRuntime's deferred events completed at the high watermark), so
no committed offset ever goes backwards across a failover.

One __consumer_offsets partition (the test settings): every kill hits the coordinator of all the groups
at once; ROUNDS (5, as the issue asks) kill-and-restart rounds. Duplicates stay within the uncommitted window:
a record a group consumes again lies at or after the highest offset committed before the last kill
(tests/cluster/nemesis_checks.duplicates_outside_uncommitted_window), for every client but kafkajs.

kafkajs (2.2.4) is slower to recover (8-36 s against 2-3.5 s) and consumes outside that window, for reasons
of its own (seen with KAFKAJS_DEBUG=1 on tests/js/group_consumer.js): its ConsumerGroup keeps the
coordinator found at its last join and sends heartbeats and commits there; a refused connection is not
NOT_COORDINATOR to it (only NOT_COORDINATOR, REBALANCE_IN_PROGRESS and ILLEGAL_GENERATION make it find
the coordinator again and rejoin), so it retries the dead node -- each retry waiting out a 5 s Fetch
long-poll while its fetchers stop -- until the node is back and answers NOT_COORDINATOR, or its retries
run out and it restarts the consumer. Meanwhile the new coordinator expires its members (they never
heartbeat there) and it keeps fetching its old partitions as a zombie, from positions below what the
members the partitions moved to have committed since. Kafka's broker would be as dead to it: nothing
kcoord answers differently (the Java client, by contrast, marks the coordinator unknown on a
disconnect and looks it up again)."""
from __future__ import annotations

import threading
import time

import pytest

from tests.broker.groups.procs import (
    KAFKAJS_PRESENT,
    NODE,
    ConsumerProcess,
    kafkajs_consumer,
    python_consumer,
    stop_all,
)
from tests.cluster.nemesis_checks import Committed, Consumed, duplicates_outside_uncommitted_window

ROUNDS = 5
TOPIC, PARTITIONS = "events", 6
PER_ROUND = 120  # records produced before each kill
CLIENTS = {  # group id -> (client, group.protocol)
    "g-kafka-python": ("kafka-python", "classic"),
    "g-aiokafka": ("aiokafka", "classic"),
    "g-confluent": ("confluent", "classic"),
    "g-confluent-848": ("confluent", "consumer"),
}
if KAFKAJS_PRESENT and NODE:  # tests/js/node_modules (see tests/js for how JS tests are run)
    CLIENTS["g-kafkajs"] = ("kafkajs", "classic")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420),
              pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000, overrides={
                  "offsets.topic.replication.factor": "3", "default.replication.factor": "3",
                  "num.partitions": str(PARTITIONS), "group.consumer.session.timeout.ms": "45000",
                  "group.consumer.heartbeat.interval.ms": "1000",
                  "group.consumer.min.heartbeat.interval.ms": "1000"})]


class OffsetSampler(threading.Thread):
    """OffsetFetch (v7, raw wire) of every group through the node FindCoordinator names now, all along:
    every answered sample is kept (with its time), so a committed offset that went backwards is seen."""

    def __init__(self, cluster, groups: list[str]) -> None:
        super().__init__(daemon=True)
        self.cluster, self.groups = cluster, groups
        self.samples: dict[str, list[tuple[float, dict[int, int]]]] = {g: [] for g in groups}
        self.stopping = threading.Event()

    def fetch(self, group: str) -> dict[int, int] | None:
        from kcoord.protocol import messages as m
        from kcoord.protocol.client import KafkaWireClient

        node = self.cluster.nodes[self.cluster.coordinator_of(group, timeout=2)]
        R = m.OffsetFetchRequest
        with KafkaWireClient.connect(node.bootstrap_servers, timeout=5) as client:
            answer = client.request(R(group_id=group, require_stable=False, topics=[R.OffsetFetchRequestTopic(
                name=TOPIC, partition_indexes=list(range(PARTITIONS)))]), version=7)
        if answer.error_code:
            return None
        return {p.partition_index: p.committed_offset for t in answer.topics for p in t.partitions
                if p.error_code == 0 and p.committed_offset >= 0}

    def run(self) -> None:
        while not self.stopping.is_set():
            for group in self.groups:
                try:
                    offsets = self.fetch(group)
                except Exception:  # a failover in progress: no coordinator, a dead node; sample again
                    offsets = None
                if offsets is not None:
                    self.samples[group].append((time.monotonic(), offsets))
            self.stopping.wait(0.1)

    def regressions(self) -> list[str]:
        out = []
        for group, samples in self.samples.items():
            highest: dict[int, int] = {}
            for _at, sample in samples:
                for p, offset in sample.items():
                    if offset < highest.get(p, -1):
                        out.append(f"{group} partition {p}: {highest[p]} then {offset}")
                    highest[p] = max(highest.get(p, -1), offset)
        return out

    def latest(self, group: str) -> dict[int, int]:
        return dict(self.samples[group][-1][1]) if self.samples[group] else {}

    def next_commit_after(self, group: str, since: float) -> float | None:
        """Seconds from `since` to the first sample whose offsets passed the last one before it."""
        before = [s for at, s in self.samples[group] if at <= since]
        base = before[-1] if before else {}
        for at, sample in self.samples[group]:
            if at > since and any(o > base.get(p, -1) for p, o in sample.items()):
                return at - since
        return None


def _produce(producer, start: int, count: int) -> None:
    futures = [producer.send(TOPIC, key=f"k-{i}".encode(), value=b"v") for i in range(start, start + count)]
    producer.flush(60)
    for f in futures:
        f.get(timeout=60)


def wait_until(condition, timeout: float, what: str, on_timeout=None):
    """testkit.waiting.wait_until, with what the consumers said when it times out."""
    from kcoord.testkit.waiting import wait_until as wait

    try:
        return wait(condition, timeout, what, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{on_timeout() if on_timeout else ''}") from None


def _keys(consumers: list[ConsumerProcess]) -> set[str]:
    return {k for c in consumers for _p, _o, k in c.records() if k}


def _end_offsets(bootstrap: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        ends = consumer.end_offsets([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        consumer.close()


def _consumer(client: str, protocol: str, bootstrap: str, group: str, name: str) -> ConsumerProcess:
    if client == "kafkajs":  # commits after each batch (kafkajs' autoCommit); 150 s of life
        return kafkajs_consumer(bootstrap, group, TOPIC, name)
    return python_consumer(client, bootstrap, group, TOPIC, name, session_timeout_ms=6000, group_protocol=protocol,
                           max_seconds=400)


def test_groups_of_every_client_survive_sigkills_of_their_coordinator(kafka_cluster):
    from kafka import KafkaProducer

    bootstrap = kafka_cluster.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, retry_backoff_ms=200,
                             request_timeout_ms=10_000, max_in_flight_requests_per_connection=1)
    produced = 0
    _produce(producer, produced, PER_ROUND)  # creates the topic (rf 3, 6 partitions)
    produced += PER_ROUND
    consumers = {group: [_consumer(client, protocol, bootstrap, group, f"{group}-{i}") for i in range(3)]
                     for group, (client, protocol) in CLIENTS.items()}
    sampler = OffsetSampler(kafka_cluster, list(CLIENTS))
    sampler.start()
    everyone = [c for cs in consumers.values() for c in cs]
    kills: list[float] = []
    try:
        wanted = {f"k-{i}" for i in range(produced)}
        for group, members in consumers.items():
            wait_until(lambda m=members, w=wanted: w <= _keys(m), 90, f"{group} consumes the first records",
                       on_timeout=lambda m=members: "\n".join(c.describe() for c in m))
        for round_ in range(ROUNDS):
            coordinator = kafka_cluster.coordinator_of("g-kafka-python")
            assert all(kafka_cluster.coordinator_of(g) == coordinator for g in CLIENTS)  # one offsets partition
            kafka_cluster.kill(coordinator)
            kills.append(time.monotonic())
            _produce(producer, produced, PER_ROUND)
            produced += PER_ROUND
            wanted = {f"k-{i}" for i in range(produced)}
            moved = kafka_cluster.coordinator_of("g-kafka-python", timeout=30)
            assert moved != coordinator
            for group, members in consumers.items():
                wait_until(lambda m=members, w=wanted: w <= _keys(m), 90,
                           f"round {round_}: {group} consumes again through node {moved}",
                           on_timeout=lambda m=members: "\n".join(c.describe() for c in m))
            kafka_cluster.restart(coordinator)
            kafka_cluster.wait_registered({1, 2, 3}, timeout=30)
        ends = _end_offsets(bootstrap)
        for group in CLIENTS:
            wait_until(lambda g=group: sampler.latest(g) == ends, 60, f"{group} commits everything",
                       on_timeout=lambda g=group: f"committed {sampler.latest(g)}, ends {ends}")
    finally:
        sampler.stopping.set()
        stop_all(everyone)
        producer.close()
        sampler.join(10)
    assert sampler.regressions() == []
    recovery = {g: [sampler.next_commit_after(g, at) for at in kills] for g in CLIENTS}
    print("seconds from SIGKILL of the coordinator to the group's next commit:", recovery)
    assert all(t is not None for times in recovery.values() for t in times), recovery
    for group, members in consumers.items():
        assert _keys(members) >= {f"k-{i}" for i in range(produced)}, group
    checked = [g for g, (client, _) in CLIENTS.items() if client != "kafkajs"]  # see the module docstring
    outside = {g: duplicates_outside_uncommitted_window(*_consumed_and_committed(consumers[g], sampler, g), kills)
               for g in checked}
    assert outside == {g: [] for g in checked}


def _consumed_and_committed(members: list[ConsumerProcess], sampler: OffsetSampler, group: str
                            ) -> tuple[list[Consumed], list[Committed]]:
    """What the group's members consumed, and every offset known committed when: the commits its members
    saw acknowledged, and the sampler's OffsetFetch answers (kafkajs reports no commits of its own)."""
    consumed = [Consumed(t, p, o) for c in members for t, p, o in c.records_at()]
    committed = [Committed(t, p, o) for c in members for t, p, o in c.commits_at()]
    committed += [Committed(at, p, o) for at, offsets in sampler.samples[group] for p, o in offsets.items()]
    return consumed, committed


def _commit(client, group: str, offset: int) -> int:
    """A simple (memberless, Kafka's admin-style) OffsetCommit v8 of `group` on `client`; its error code."""
    return client.request(m_commit(group, offset), version=8).topics[0].partitions[0].error_code


def _marker(client, partition: int = 0) -> int:
    """An ABORT marker into `__consumer_offsets-<partition>` (WriteTxnMarkers v1, a producer id no
    transaction uses); its error code."""
    from kcoord.protocol import messages as m

    Rq = m.WriteTxnMarkersRequest
    response = client.request(Rq(markers=[Rq.WritableTxnMarker(
        producer_id=2**40 + 27, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[Rq.WritableTxnMarker.WritableTxnMarkerTopic(name="__consumer_offsets", partition_indexes=[partition])])]),
        version=1)
    return response.markers[0].topics[0].partitions[0].error_code


def _client(cluster, node_id: int):
    from kcoord.protocol.client import KafkaWireClient

    return KafkaWireClient.connect(cluster.nodes[node_id].bootstrap_servers, timeout=20)


def test_only_the_leader_of_the_offsets_partition_coordinates_and_a_move_carries_the_commits(kafka_cluster):
    """KafkaApis.handleFindCoordinatorRequest: every node names the partition's leader; the others answer
    NOT_COORDINATOR (GroupCoordinatorService: the shard is not owned here), and a transaction marker into
    the partition NOT_LEADER_OR_FOLLOWER there and while it loads (KafkaApis.handleWriteTxnMarkersRequest
    translates the group coordinator's NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS); ElectLeaders moving
    the partition makes the new leader load it (onElection) with every acknowledged commit, and the old one
    answers NOT_COORDINATOR (onResignation)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers, acks="all")
    producer.send(TOPIC, b"x").get(30)  # the topic exists: commits name a real partition
    producer.close()
    coordinator = kafka_cluster.coordinator_of("g-raw")
    assert all(kafka_cluster.coordinator_of("g-raw", via=n) == coordinator for n in (1, 2, 3))
    with _client(kafka_cluster, coordinator) as client:
        assert _commit(client, "g-raw", 5) == 0
    others = [n for n in (1, 2, 3) if n != coordinator]
    from kcoord.protocol import messages as m

    for node_id in others:
        with _client(kafka_cluster, node_id) as client:
            assert _commit(client, "g-raw", 6) == 16  # NOT_COORDINATOR
            assert _marker(client) == 6  # NOT_LEADER_OR_FOLLOWER
            heartbeat = m.HeartbeatRequest(group_id="g-raw", generation_id=1, member_id="m", group_instance_id=None)
            assert client.request(heartbeat, version=4).error_code == 16
            fetched = client.request(m.OffsetFetchRequest(group_id="g-raw", topics=None, require_stable=False),
                                     version=7)
            assert fetched.error_code == 16
            [described] = client.request(m.DescribeGroupsRequest(groups=["g-raw"], include_authorized_operations=False),
                                         version=5).groups
            assert described.error_code == 16
            batched = client.request(m.FindCoordinatorRequest(key_type=0, coordinator_keys=["g-raw", "g-raw-2"]),
                                     version=4)
            assert [(c.key, c.error_code, c.node_id) for c in batched.coordinators] == \
                [("g-raw", 0, coordinator), ("g-raw-2", 0, coordinator)]  # one offsets partition
    target = others[0]
    held = kafka_cluster.nodes[target].admin.request("POST", "/coordinator/hold-load", {"partitions": [0]})
    assert held == {"held": [0]}
    kafka_cluster.move_coordinator("g-raw", to=target)
    with _client(kafka_cluster, coordinator) as client:
        assert _commit(client, "g-raw", 7) == 16
    with _client(kafka_cluster, target) as client:
        assert _commit(client, "g-raw", 8) == 14  # COORDINATOR_LOAD_IN_PROGRESS while the shard loads
        assert _marker(client) == 6
        kafka_cluster.nodes[target].admin.request("POST", "/coordinator/release-load", {})
        answer = wait_until(lambda: (e := _commit(client, "g-raw", 8)) != 14 and [e], 15, "the new coordinator's load")
        assert answer == [0]
        assert _marker(client) == 0
    sampler = OffsetSampler(kafka_cluster, ["g-raw"])
    assert sampler.fetch("g-raw") == {0: 8}
    # the admin endpoint's reload: the partitions led here resigned and elected again at their epochs
    assert kafka_cluster.nodes[target].admin.request("POST", "/coordinator/reload", {}) == {"partitions": 1}
    assert wait_until(lambda: sampler.fetch("g-raw"), 15, "the reloaded shard") == {0: 8}


@pytest.mark.kcoord_cluster(nodes=3, session_timeout_ms=2000, overrides={
    "offsets.topic.replication.factor": "3", "default.replication.factor": "3", "num.partitions": str(PARTITIONS)})
def test_a_coordinator_paused_past_its_lease_never_acknowledges_another_commit(kafka_cluster):
    """The paused coordinator's lease expires and another node takes the partition; resumed, the first
    thing it reads is a commit sent to it meanwhile. It must not acknowledge it (Kafka: the write's
    high watermark never moves, the old leader's ISR change is refused, and the resignation fails it with
    NOT_COORDINATOR): the answer is an error the client retries elsewhere, and the offset the new
    coordinator serves is never that commit's. The group's consumers move to the new coordinator."""
    from kafka import KafkaProducer

    bootstrap = kafka_cluster.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, retry_backoff_ms=200)
    _produce(producer, 0, PER_ROUND)
    members = [python_consumer("kafka-python", bootstrap, "g-paused", TOPIC, f"paused-{i}", session_timeout_ms=6000,
                               max_seconds=200) for i in range(3)]
    try:
        wanted = {f"k-{i}" for i in range(PER_ROUND)}
        wait_until(lambda: wanted <= _keys(members), 60, "the group consumes",
                   on_timeout=lambda: "\n".join(c.describe() for c in members))
        paused = kafka_cluster.coordinator_of("g-paused")
        with _client(kafka_cluster, paused) as zombie:
            assert _commit(zombie, "g-raw", 1) == 0
            kafka_cluster.pause(paused)
            try:
                others = [n for n in (1, 2, 3) if n != paused]
                moved = kafka_cluster._poll(lambda: kafka_cluster.coordinator_of("g-paused", via=others[0]),
                                            lambda n: n in others, 30, "a new coordinator")
                _produce(producer, PER_ROUND, PER_ROUND)
                wanted = {f"k-{i}" for i in range(2 * PER_ROUND)}
                wait_until(lambda: wanted <= _keys(members), 60, f"the group consumes through node {moved}",
                           on_timeout=lambda: "\n".join(c.describe() for c in members))
                with _client(kafka_cluster, moved) as client:
                    assert _commit(client, "g-raw", 2) == 0
                zombie.send(m_commit("g-raw", 99), version=8)  # waits in the paused node's socket
            finally:
                kafka_cluster.resume(paused)
            answer = zombie.receive()
            assert answer.topics[0].partitions[0].error_code in (16, 15), answer  # NOT_COORDINATOR / NOT_AVAILABLE
        with _client(kafka_cluster, paused) as client:  # and from then on NOT_COORDINATOR
            wait_until(lambda: _commit(client, "g-raw", 100) == 16 or kafka_cluster.coordinator_of("g-raw") == paused,
                       30, "NOT_COORDINATOR from the resumed node")
        sampler = OffsetSampler(kafka_cluster, ["g-raw"])
        assert sampler.fetch("g-raw") == {0: 2}
        _produce(producer, 2 * PER_ROUND, PER_ROUND)
        wanted = {f"k-{i}" for i in range(3 * PER_ROUND)}
        wait_until(lambda: wanted <= _keys(members), 60, "the group goes on consuming",
                   on_timeout=lambda: "\n".join(c.describe() for c in members))
    finally:
        stop_all(members)
        producer.close()


def m_commit(group: str, offset: int):
    from kcoord.protocol import messages as m

    R = m.OffsetCommitRequest
    return R(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
             topics=[R.OffsetCommitRequestTopic(name=TOPIC, partitions=[R.OffsetCommitRequestPartition(
                 partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])])
