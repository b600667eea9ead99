"""A regex subscription over real TCP: the literal topic's partitions come first, the regex's in a later
assignment, once the coordinator's background resolution has been written -- Kafka 4's
group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java:
consumerGroupHeartbeat -> maybeUpdateRegularExpressions schedules the refresh, refreshRegularExpressions
resolves, handleRegularExpressionsResult writes the ConsumerGroupRegularExpression records and bumps the
group epoch; the member's next heartbeat gets the new target."""
from __future__ import annotations

import time
import uuid

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.groups.group_server import GROUP_TEST_OVERRIDES, start_group_server

R = m.ConsumerGroupHeartbeatRequest
OVERRIDES = dict(GROUP_TEST_OVERRIDES, **{"group.consumer.heartbeat.interval.ms": "500",
                                          "group.consumer.min.heartbeat.interval.ms": "100"})
TOPICS = {"literal-topic": 2, "regex-a": 3, "regex-b": 1, "not-regex": 1}


@pytest.fixture(scope="module")
def regex_server(tmp_path_factory):
    srv = start_group_server(tmp_path_factory.mktemp("regex"), dict(OVERRIDES), name="regex")
    for name, partitions in TOPICS.items():
        srv.create_topic(name, partitions)
    yield srv
    srv.stop()


def _names(client) -> dict[uuid.UUID, str]:
    resp = client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=n) for n in TOPICS],
                                            allow_auto_topic_creation=False), 12)
    return {t.topic_id: t.name for t in resp.topics}


def _assigned(resp, names) -> set[tuple[str, int]]:
    return {(names[tp.topic_id], p) for tp in resp.assignment.topic_partitions for p in tp.partitions}


def test_raw_member_gets_the_literal_topic_first_and_the_regex_topics_later(regex_server):
    """A ConsumerGroupHeartbeat v1 client subscribing to SubscribedTopicNames ["literal-topic"] and
    SubscribedTopicRegex "regex-.*": its join is answered at epoch 1 with literal-topic only (the regex is
    not resolved yet: GroupMetadataManager.consumerGroupHeartbeat bumps for the names, and
    maybeUpdateRegularExpressions only schedules the regex's refresh); a later heartbeat, after
    handleRegularExpressionsResult bumped the epoch, carries epoch 2 and the regex's topics."""
    group = "regex-raw"
    with KafkaWireClient.connect(regex_server.bootstrap, client_id="regex-raw") as client:
        names = _names(client)
        join = client.request(R(group_id=group, member_id="raw-member", member_epoch=0, instance_id=None,
                                rack_id=None, rebalance_timeout_ms=30_000, subscribed_topic_names=["literal-topic"],
                                subscribed_topic_regex="regex-.*", server_assignor=None, topic_partitions=[]), 1)
        assert (join.error_code, join.member_epoch) == (E.NONE, 1)
        assert _assigned(join, names) == {("literal-topic", 0), ("literal-topic", 1)}

        owned = [R.TopicPartitions(topic_id=tp.topic_id, partitions=list(tp.partitions))
                 for tp in join.assignment.topic_partitions]
        epoch, answers = join.member_epoch, []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            time.sleep(0.1)
            resp = client.request(R(group_id=group, member_id="raw-member", member_epoch=epoch, instance_id=None,
                                    rack_id=None, rebalance_timeout_ms=-1, subscribed_topic_names=None,
                                    subscribed_topic_regex=None, server_assignor=None, topic_partitions=owned), 1)
            assert resp.error_code == E.NONE, resp
            answers.append((resp.member_epoch, None if resp.assignment is None else _assigned(resp, names)))
            epoch = resp.member_epoch
            if resp.assignment is not None:
                break
    assert answers[-1] == (2, {("literal-topic", 0), ("literal-topic", 1), ("regex-a", 0), ("regex-a", 1),
                               ("regex-a", 2), ("regex-b", 0)}), answers
    assert all(assignment is None for _, assignment in answers[:-1])
    assert "Bumped group epoch to 2 (regex_resolved)" in regex_server.log_text()


def test_confluent_kafka_sees_the_literal_topic_assigned_before_the_regex_topics(regex_server):
    """confluent-kafka 2.16.1 with group.protocol=consumer, subscribed to ["^regex-.*", "literal-topic"]
    (librdkafka sends the ^-pattern as SubscribedTopicRegex): its first assignment (an incremental
    on_assign) is literal-topic's partitions alone; the regex's come in a later one, after the
    coordinator wrote their resolution (GroupMetadataManager.handleRegularExpressionsResult)."""
    from confluent_kafka import Consumer

    increments: list[set[tuple[str, int]]] = []
    consumer = Consumer({"bootstrap.servers": regex_server.bootstrap, "group.id": "regex-confluent",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    want = {("literal-topic", 0), ("literal-topic", 1), ("regex-a", 0), ("regex-a", 1), ("regex-a", 2),
            ("regex-b", 0)}
    try:
        consumer.subscribe(["^regex-.*", "literal-topic"],
                           on_assign=lambda c, ps: increments.append({(p.topic, p.partition) for p in ps}))
        deadline = time.monotonic() + 30
        while set().union(*increments) != want:
            assert time.monotonic() < deadline, f"timed out: {increments}"
            consumer.poll(0.1)
    finally:
        consumer.close()
    assert increments[0] == {("literal-topic", 0), ("literal-topic", 1)}, increments
    assert len(increments) >= 2 and set().union(*increments[1:]) == want - increments[0], increments
