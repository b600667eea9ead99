"""KIP-848 end to end: confluent-kafka (librdkafka) consumers with `group.protocol=consumer` against the
real server. The coordinator assigns (GroupMetadataManager.consumerGroupHeartbeat, Kafka 4), members
come and go while a producer runs, and every record is delivered; none is delivered again once its
offset was committed; committed offsets survive a server SIGKILL."""
from __future__ import annotations

import collections
import re
import signal
import threading
import time

import pytest
from kafka import KafkaProducer

from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.group_server import GROUP_TEST_OVERRIDES, start_group_server
from tests.broker.groups.procs import disjoint_cover

PARTITIONS = 6
OVERRIDES = dict(GROUP_TEST_OVERRIDES, **{"group.consumer.heartbeat.interval.ms": "500",
                                          "group.consumer.min.heartbeat.interval.ms": "100",
                                          "group.consumer.session.timeout.ms": "6000",
                                          "group.consumer.min.session.timeout.ms": "1000"})


@pytest.fixture
def kip848_server(tmp_path):
    srv = start_group_server(tmp_path, dict(OVERRIDES), name="kip848")
    yield srv
    srv.stop()


class KeyedProducer:
    """Produces keyed records in the background until stopped; remembers every acknowledged key."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.sent: list[str] = []
        self._stop = threading.Event()
        self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            key = f"k-{i}"
            self._producer.send(self.topic, key=key.encode(), value=b"v").get(30)
            self.sent.append(key)
            i += 1
            time.sleep(0.01)

    def stop(self) -> list[str]:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(30)
            self._producer.close(10)
        return self.sent


def consumer(server, group: str, topic: str, name: str, assignor: str | None = None):
    return procs.python_consumer("confluent", server.bootstrap, group, topic, name, group_protocol="consumer",
                                 remote_assignor=assignor)


def wait_cover(consumers, what: str) -> None:
    wait_until(lambda: all(c.alive for c in consumers) and disjoint_cover([c.assignment for c in consumers],
                                                                          PARTITIONS), 60,
               f"{what}: disjoint assignments covering every partition\n" + "\n".join(c.describe() for c in consumers))


def assert_no_redelivery_after_commit(consumers) -> None:
    """A record consumed twice was not committed by the first consumer: at most one of the consumers that
    read (p, o) committed past o (the last one)."""
    readers = collections.defaultdict(list)
    for c in consumers:
        for p, o, _k in c.records():
            readers[(p, o)].append(c)
    for (p, o), cs in readers.items():
        if len(cs) > 1:
            committed_past = [c.name for c in cs if c.committed().get(p, 0) > o]
            assert len(committed_past) <= 1, f"{p}@{o} read again after {committed_past[0]} committed it"


@pytest.mark.parametrize("assignor", [None, "range"])
def test_members_join_leave_and_die_while_a_producer_runs(kip848_server, assignor):
    server, topic, group = kip848_server, "kip848", "kip848-group"
    server.create_topic(topic, PARTITIONS)
    producer = KeyedProducer(server.bootstrap, topic)
    everyone = []
    try:
        c1, c2 = consumer(server, group, topic, "c1", assignor), consumer(server, group, topic, "c2", assignor)
        everyone += [c1, c2]
        wait_cover([c1, c2], "two members")
        c3 = consumer(server, group, topic, "c3", assignor)  # joins late
        everyone.append(c3)
        wait_cover([c1, c2, c3], "a third member joined")
        assert all(c.assignment for c in (c1, c2, c3))
        c2.terminate()  # leaves (epoch -1)
        wait_cover([c1, c3], "c2 left")
        c3.kill()  # dies: its partitions come back after group.consumer.session.timeout.ms
        wait_cover([c1], "c3 was fenced when its session expired")
        sent = producer.stop()
        wait_until(lambda: {k for c in everyone for _p, _o, k in c.records()} >= set(sent), 60,
                   "every produced record consumed\n" + c1.describe())
        assert_no_redelivery_after_commit(everyone)
        ends = server.end_offsets(topic, PARTITIONS)
        wait_until(lambda: procs.committed_max([c1]) == ends, 30, "c1, alone, committed every partition's end")
        assert "fenced from the group because the member session expired" in server.log_text()
    finally:
        producer.stop()
        procs.stop_all(everyone)


def test_committed_offsets_resume_after_server_sigkill(kip848_server):
    server, topic, group = kip848_server, "kip848-restart", "kip848-restart-group"
    server.create_topic(topic, PARTITIONS)
    first = server.produce_keyed(topic, 120, prefix="a-")
    c1 = consumer(server, group, topic, "before")
    try:
        wait_until(lambda: len(c1.records()) >= len(first) and sum(c1.committed().values()) >= len(first), 60,
                   "the first records consumed and committed\n" + c1.describe())
    finally:
        procs.stop_all([c1])
    committed = server.committed_offsets(group, topic, PARTITIONS)
    assert sum(committed.values()) == len(first)
    server.restart(signal.SIGKILL)
    assert server.committed_offsets(group, topic, PARTITIONS) == committed
    second = server.produce_keyed(topic, 60, prefix="b-")
    c2 = consumer(server, group, topic, "after")
    try:
        wait_until(lambda: len(c2.records()) >= len(second), 60, "the new records consumed\n" + c2.describe())
        assert sorted(k for _p, _o, k in c2.records()) == sorted(second)  # nothing before the commits again
        first_offsets = {}
        for p, o, _k in c2.records():
            first_offsets.setdefault(p, o)
        assert all(first_offsets[p] == committed[p] for p in first_offsets)
    finally:
        procs.stop_all([c2])


def test_kcoord_groups_describe_shows_epochs_and_target_vs_current(kip848_server):
    """Two members mid-reconciliation (raw ConsumerGroupHeartbeat): the first still owns every partition,
    its target is half of them; `kcoord groups describe` shows both, with the epochs, and ListGroups v5
    filters by type."""
    from kcoord.protocol import messages as m
    from kcoord.protocol.client import KafkaWireClient
    from tests.broker.groups.test_admin_and_cli import kcoord_groups

    server, topic, group = kip848_server, "kip848-cli", "kip848-cli-group"
    server.create_topic(topic, 4)
    R = m.ConsumerGroupHeartbeatRequest

    def join(client, member_id):
        return client.request(R(group_id=group, member_id=member_id, member_epoch=0, instance_id=None,
                                rack_id=None, rebalance_timeout_ms=60000, subscribed_topic_names=[topic],
                                subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]))

    with KafkaWireClient.connect(server.bootstrap) as client:
        assert join(client, "member-a").member_epoch == 1
        assert join(client, "member-b").member_epoch == 2
        listed = client.request(m.ListGroupsRequest(states_filter=[], types_filter=["consumer"]), 5).groups
        assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [(group, "consumer", "Reconciling")]
        assert client.request(m.ListGroupsRequest(states_filter=[], types_filter=["classic"]), 5).groups == []
    out = kcoord_groups(server.bootstrap, "describe", group)
    assert out.returncode == 0, out.stderr
    assert f"Consumer group '{group}' (Reconciling): group epoch 2, assignment epoch 2, assignor uniform" in out.stdout
    lines = {line.split()[1]: line.split() for line in out.stdout.splitlines() if line.startswith(f"{group} member-")}
    assert lines["member-a"][4:] == ["4", "1", f"{topic}:0,1,2,3", "2", f"{topic}:0,1"]
    assert lines["member-b"][4:] == ["0", "2", "-", "2", f"{topic}:2,3"]


def test_regex_subscription_picks_up_a_new_topic(kip848_server):
    """librdkafka sends a `^`-pattern subscription as SubscribedTopicRegex (v1); the coordinator resolves it
    in the background against the topics (whole-name match, as RE2/J's Pattern.matches) and a topic
    created later is assigned once a heartbeat more than REGEX_BATCH_REFRESH_MIN_INTERVAL_MS (10 s) after
    the last resolution had it resolved again: the new resolution is recorded and bumps the group epoch
    (GroupMetadataManager.maybeUpdateRegularExpressions, handleRegularExpressionsResult)."""
    from confluent_kafka import Consumer

    server = kip848_server
    server.create_topic("re-a", 3)
    server.create_topic("not-re", 2)
    owned: set = set()
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "kip848-regex",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000})

    def poll_until(condition, what):
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {sorted(owned)}"
            consumer.poll(0.2)

    try:
        consumer.subscribe(["^re-.*"], on_assign=lambda c, ps: owned.update((p.topic, p.partition) for p in ps),
                           on_revoke=lambda c, ps: owned.difference_update((p.topic, p.partition) for p in ps))
        poll_until(lambda: owned == {("re-a", p) for p in range(3)}, "re-a assigned")
        server.create_topic("re-b", 2)
        poll_until(lambda: owned == {("re-a", p) for p in range(3)} | {("re-b", 0), ("re-b", 1)}, "re-b assigned")
    finally:
        consumer.close()
    assert "Bumped group epoch to 2 (regex_resolved)" in server.log_text()


def test_consumer_group_survives_a_restart_through_its_checkpoint(kip848_server):
    """A clean stop writes checkpoints (format 2 carries the consumer group records); the restarted server
    loads the group from them: same epochs and assignment, and the member heartbeats on in its epoch."""
    from kcoord.protocol import messages as m
    from kcoord.protocol.client import KafkaWireClient

    server, topic, group = kip848_server, "kip848-ckpt", "kip848-ckpt-group"
    server.create_topic(topic, 3)
    R = m.ConsumerGroupHeartbeatRequest
    with KafkaWireClient.connect(server.bootstrap) as client:
        joined = client.request(R(group_id=group, member_id="m1", member_epoch=0, instance_id=None, rack_id=None,
                                  rebalance_timeout_ms=60000, subscribed_topic_names=[topic],
                                  subscribed_topic_regex=None, server_assignor="range", topic_partitions=[]))
        assert joined.member_epoch == 1
    server.restart(signal.SIGTERM)
    loads = re.findall(r"\((\d+) from checkpoints; (\d+) records replayed\)", server.log_text())
    assert int(loads[-1][0]) > 0 and loads[-1][1] == "0", loads  # nothing from the log: all from checkpoints
    with KafkaWireClient.connect(server.bootstrap) as client:
        (g,) = client.request(m.ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)
                              ).groups
        assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (0, "Stable", 1, "range")
        assert [p for tp in g.members[0].assignment.topic_partitions for p in tp.partitions] == [0, 1, 2]
        again = client.request(R(group_id=group, member_id="m1", member_epoch=1, instance_id=None, rack_id=None,
                                 rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                                 server_assignor=None, topic_partitions=None))
        assert (again.error_code, again.member_epoch) == (0, 1)


def test_static_member_restart_keeps_its_partitions(kip848_server):
    """librdkafka's static member (group.instance.id) leaves with epoch -2 on close and rejoins with a new
    member id: it gets its partitions back, the other member keeps its own, and the group epoch does not
    move (GroupMetadataManager.consumerGroupStaticMemberGroupLeave, getOrMaybeSubscribeStaticConsumerGroupMember)."""
    from confluent_kafka import Consumer

    server = kip848_server
    server.create_topic("kip848-static", 4)

    def member(instance_id):
        owned: set = set()
        c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "kip848-static-group",
                      "group.protocol": "consumer", "group.instance.id": instance_id, "auto.offset.reset": "earliest"})
        c.subscribe(["kip848-static"], on_assign=lambda _c, ps: owned.update(p.partition for p in ps),
                    on_revoke=lambda _c, ps: owned.difference_update(p.partition for p in ps))
        return c, owned

    def poll_until(consumers, condition, what):
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            for c in consumers:
                c.poll(0.1)

    (c1, o1), (c2, o2) = member("i1"), member("i2")
    try:
        poll_until([c1, c2], lambda: o1 and o2 and sorted(o1 | o2) == [0, 1, 2, 3], "two static members")
        kept1, kept2 = set(o1), set(o2)
        c1.close()
        poll_until([c2], lambda: "temporarily left" in server.log_text(), "the temporary leave")
        c1, o1 = member("i1")
        poll_until([c1, c2], lambda: o1 == kept1, "i1 back with its partitions")
        assert o2 == kept2
    finally:
        c1.close()
        c2.close()
    assert "Bumped group epoch to 3" not in server.log_text()
    assert "Static member with instance id i1 re-joins the consumer group" in server.log_text()


def test_server_sigkill_while_members_consume(kip848_server):
    """The server dies (SIGKILL) under two consuming members and a producer, and comes back on the same
    port and data: the group is replayed from the log (members keep their epochs and a fresh session), the
    members carry on, every record is delivered, none again after its offset was committed."""
    server, topic, group = kip848_server, "kip848-crash", "kip848-crash-group"
    server.create_topic(topic, PARTITIONS)
    c1, c2 = consumer(server, group, topic, "crash-1"), consumer(server, group, topic, "crash-2")
    first = []
    try:
        wait_cover([c1, c2], "two members")
        first = server.produce_keyed(topic, 200, prefix="before-")
        wait_until(lambda: {k for c in (c1, c2) for _p, _o, k in c.records()} >= set(first), 60, "first batch")
        server.restart(signal.SIGKILL)
        second = server.produce_keyed(topic, 200, prefix="after-")
        wait_until(lambda: {k for c in (c1, c2) for _p, _o, k in c.records()} >= set(first + second), 90,
                   "every record after the crash\n" + c1.describe() + "\n" + c2.describe())
        assert c1.alive and c2.alive
        assert_no_redelivery_after_commit([c1, c2])
        ends = server.end_offsets(topic, PARTITIONS)
        wait_until(lambda: server.committed_offsets(group, topic, PARTITIONS) == ends, 30, "everything committed")
    finally:
        procs.stop_all([c1, c2])


def test_confluent_admin_client_describes_and_lists_consumer_groups(kip848_server):
    """confluent AdminClient: describe_consumer_groups goes through ConsumerGroupDescribe (type CONSUMER,
    member assignment and target), list_consumer_groups through ListGroups v5 (type filter)."""
    from confluent_kafka import Consumer, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    server = kip848_server
    server.create_topic("kip848-admin", 3)
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "kip848-admin-group",
                         "group.protocol": "consumer"})
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    try:
        consumer.subscribe(["kip848-admin"])
        described = None
        deadline = time.monotonic() + 30
        while described is None or len(described.members[0].assignment.topic_partitions) < 3:
            assert time.monotonic() < deadline, described
            consumer.poll(0.2)
            described = admin.describe_consumer_groups(["kip848-admin-group"])["kip848-admin-group"].result()
            if not described.members:
                described = None
        assert described.type == ConsumerGroupType.CONSUMER and str(described.state).endswith("STABLE")
        (member,) = described.members
        assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1, 2]
        assert sorted(tp.partition for tp in member.target_assignment.topic_partitions) == [0, 1, 2]
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result().valid
        assert [(g.group_id, g.type) for g in listed] == [("kip848-admin-group", ConsumerGroupType.CONSUMER)]
        assert admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result().valid == []
    finally:
        consumer.close()


def test_platformatic_kafka_two_members_share_a_topic(kip848_server):
    """@platformatic/kafka (npm) with groupProtocol 'consumer': two members settle on disjoint halves of the
    topic (ConsumerGroupDescribe: Stable, both at the group epoch) and the group consumes every record.
    Not asserted: once each -- @platformatic/kafka 1.35.0 keeps fetching partitions after it has revoked
    them (its heartbeats report only its own half; the coordinator's view stays disjoint)."""
    from kcoord.protocol import messages as m
    from kcoord.protocol.client import KafkaWireClient

    if procs.NODE is None or not procs.PLATFORMATIC_PRESENT:
        pytest.skip("@platformatic/kafka is not installed: run `cd tests/js && npm install` (or `make tools`)")
    server, topic, group = kip848_server, "kip848-js", "kip848-js-group"
    server.create_topic(topic, 4)
    members = [procs.platformatic_consumer(server.bootstrap, group, topic, f"js-{i}") for i in range(2)]

    def settled():
        with KafkaWireClient.connect(server.bootstrap) as client:
            (g,) = client.request(m.ConsumerGroupDescribeRequest(group_ids=[group],
                                                                 include_authorized_operations=False)).groups
        owned = [sorted(p for tp in mm.assignment.topic_partitions for p in tp.partitions) for mm in g.members]
        return (g.group_state == "Stable" and len(owned) == 2 and all(owned)
                and sorted(owned[0] + owned[1]) == [0, 1, 2, 3]
                and all(mm.member_epoch == g.group_epoch for mm in g.members))

    try:
        wait_until(settled, 30, "two members holding disjoint halves\n" + "\n".join(c.describe() for c in members))
        sent = server.produce_keyed(topic, 200)
        wait_until(lambda: {k for c in members for _p, _o, k in c.records()} >= set(sent), 60,
                   "every record consumed\n" + "\n".join(c.describe() for c in members))
        assert all(c.alive for c in members) and not any(c.errors() for c in members)
    finally:
        procs.stop_all(members)


def test_kcoord_groups_reset_offsets_refuses_an_active_consumer_group(kip848_server):
    from kcoord.protocol import messages as m
    from kcoord.protocol.client import KafkaWireClient
    from tests.broker.groups.test_admin_and_cli import kcoord_groups

    server, topic, group = kip848_server, "kip848-reset", "kip848-reset-group"
    server.create_topic(topic, 2)
    R = m.ConsumerGroupHeartbeatRequest
    with KafkaWireClient.connect(server.bootstrap) as client:
        joined = client.request(R(group_id=group, member_id="m", member_epoch=0, instance_id=None, rack_id=None,
                                  rebalance_timeout_ms=60000, subscribed_topic_names=[topic],
                                  subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]))
        refused = kcoord_groups(server.bootstrap, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
        assert refused.returncode == 1 and "inactive" in refused.stderr and "Stable" in refused.stderr
        client.request(R(group_id=group, member_id="m", member_epoch=-1, instance_id=None, rack_id=None,
                         rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                         server_assignor=None, topic_partitions=None))
    assert joined.member_epoch == 1
    done = kcoord_groups(server.bootstrap, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert done.returncode == 0, done.stderr
    assert server.committed_offsets(group, topic, 2) == {0: 0, 1: 0}
