"""`kcoord groups` and the admin endpoint against any node of a cluster (issue #26: "kcoord groups and the
admin endpoint work against any node"): real etcd, 3 real kcoord nodes, groups whose __consumer_offsets
partitions are led by different nodes, real kafka-python consumers committing.

kafka-consumer-groups is the model: `--list` asks every broker (KafkaAdminClient.listConsumerGroups,
clients/src/main/java/org/apache/kafka/clients/admin/KafkaAdminClient.java), `--describe` asks the group's
coordinator (FindCoordinator) and each partition's leader for its log end (listOffsets)."""
from __future__ import annotations

import io

import pytest

from kcoord.protocol.consumer_offsets import partition_for
from kcoord.tools import groups_cli

pytestmark = [pytest.mark.slow, pytest.mark.kcoord_cluster(nodes=3, overrides={"offsets.topic.num.partitions": "3"})]

TOPIC, RECORDS = "tools", 30


def _groups() -> list[str]:
    """Three group ids on the three __consumer_offsets partitions."""
    by_partition: dict[int, str] = {}
    for i in range(100):
        by_partition.setdefault(partition_for(f"group-{i}", 3), f"group-{i}")
    return [by_partition[p] for p in range(3)]


@pytest.fixture
def groups(kafka_cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    admin.create_topics([NewTopic(TOPIC, 3, 3)])
    admin.close()
    for p in range(3):
        kafka_cluster.wait_isr(TOPIC, p, 3)
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers, acks="all")
    for i in range(RECORDS):
        producer.send(TOPIC, f"r{i}".encode(), partition=i % 3)
    producer.flush()
    producer.close()
    names = _groups()
    for group in names:
        consumer = KafkaConsumer(TOPIC, bootstrap_servers=kafka_cluster.bootstrap_servers, group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest", consumer_timeout_ms=10_000)
        consumer.partitions_for_topic(TOPIC)  # before the first join: see tests/test_example_app.py's App
        seen = 0
        for _record in consumer:
            seen += 1
            if seen == RECORDS:
                break
        assert seen == RECORDS, f"{group} consumed {seen} of {RECORDS}"
        consumer.commit()
        consumer.close()
    return names


def _tool(*argv: str) -> str:
    out = io.StringIO()
    args = groups_cli.build_parser().parse_args(list(argv))
    groups_cli.run(args, out)
    return out.getvalue()


def test_groups_list_and_describe_answer_the_same_through_every_node(kafka_cluster, groups):
    coordinators = {kafka_cluster.leader_of("__consumer_offsets", partition_for(g, 3)) for g in groups}
    listed, described = {}, {}
    for node_id, node in kafka_cluster.nodes.items():
        listed[node_id] = _tool("--bootstrap-server", node.bootstrap_servers, "list").split()
        for group in groups:
            lines = _tool("--bootstrap-server", node.bootstrap_servers, "describe", group).splitlines()
            rows = [line.split() for line in lines if line.startswith(group)]
            described[(node_id, group)] = sorted((r[2], r[3], r[4], r[5]) for r in rows)
    expected = sorted((str(p), "10", "10", "0") for p in range(3))  # committed = log end, no lag
    assert {n: sorted(v) for n, v in listed.items()} == {n: sorted(groups) for n in kafka_cluster.nodes}
    assert described == {(n, g): expected for n in kafka_cluster.nodes for g in groups}
    assert len(coordinators) > 1, f"every group on one coordinator ({coordinators}): the test shows nothing"


def test_a_bootstrap_list_is_tried_in_turn(kafka_cluster, groups):
    from kcoord.testkit.etcd import free_port

    dead = f"127.0.0.1:{free_port()}"
    assert sorted(_tool("--bootstrap-server", f"{dead},{kafka_cluster.bootstrap_servers}", "list").split()) == \
        sorted(groups)


def test_the_admin_endpoint_of_every_node_controls_that_node(kafka_cluster, groups):
    """Faults: each node's endpoint injects into that node's answers only. Group timers: the coordinator's
    endpoint expires a live member; any other node answers 421 naming the coordinator."""
    from kafka import KafkaConsumer

    from kcoord.broker.admin_client import AdminRequestError
    from kcoord.protocol import messages as m
    from kcoord.protocol.client import KafkaWireClient
    from kcoord.protocol.errors import ErrorCode
    from kcoord.testkit.waiting import wait_until

    for faulted in kafka_cluster.nodes.values():
        faulted.faults.add("ListGroups", error="COORDINATOR_NOT_AVAILABLE", count=1)
        answers = {}
        for node_id, node in kafka_cluster.nodes.items():
            with KafkaWireClient.connect(node.bootstrap_servers) as client:
                answers[node_id] = ErrorCode(client.request(m.ListGroupsRequest(states_filter=[], types_filter=[]),
                                                            4).error_code)
        assert answers == {n: ErrorCode.COORDINATOR_NOT_AVAILABLE if node is faulted else ErrorCode.NONE
                           for n, node in kafka_cluster.nodes.items()}

    group = groups[0]
    coordinator = kafka_cluster.leader_of("__consumer_offsets", partition_for(group, 3))
    # kafka-python 3.0.12 can join before its first metadata names the topic's partitions (an empty assignment)
    # and its rejoin on the next metadata may never complete: see tests/test_example_app.py's App
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=kafka_cluster.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, session_timeout_ms=30_000, metadata_max_age_ms=500)
    consumer.partitions_for_topic(TOPIC)
    try:
        wait_until(lambda: consumer.poll(timeout_ms=200) is not None and consumer.assignment(), 30,
                   "the consumer's assignment")
        with groups_cli.coordinator_client(kafka_cluster.bootstrap_servers, group) as client:
            (member,) = groups_cli.describe_group(client, group).members
        for node_id, node in kafka_cluster.nodes.items():
            if node_id == coordinator:
                continue
            with pytest.raises(AdminRequestError, match=f"421: group '{group}' is coordinated by node {coordinator}"):
                node.timers.expire_member(group, member.member_id)
            with pytest.raises(AdminRequestError, match="421"):
                node.timers.fire(group)
        kafka_cluster.nodes[coordinator].timers.expire_member(group, member.member_id)
        with groups_cli.coordinator_client(kafka_cluster.bootstrap_servers, group) as client:
            after = groups_cli.describe_group(client, group)
        assert member.member_id not in [m.member_id for m in after.members]
    finally:
        consumer.close()
