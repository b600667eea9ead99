"""Online migration (KIP-848) end to end: kafka-python members (classic protocol, JoinGroup) and a
confluent-kafka member (`group.protocol=consumer`) in one group, under the default
`group.consumer.migration.policy` (bidirectional). The group upgrades when the consumer-protocol member
joins (GroupMetadataManager.consumerGroupHeartbeat -> convertToConsumerGroup), the kafka-python members
live on in it (classicGroupJoinToConsumerGroup / classicGroupSyncToConsumerGroup /
classicGroupHeartbeatToConsumerGroup), and it downgrades when that member leaves
(consumerGroupFenceMember -> convertToClassicGroup); a producer runs throughout and every record is
consumed."""
from __future__ import annotations

import signal
import urllib.request

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from kcoord.testkit.waiting import wait_until
from tests.broker.groups import procs
from tests.broker.groups.group_server import start_group_server
from tests.broker.groups.procs import disjoint_cover
from tests.broker.groups.test_consumer_protocol import (
    OVERRIDES,
    KeyedProducer,
    assert_no_redelivery_after_commit,
)

PARTITIONS = 6
UPGRADED = "Converted the classic group to a consumer group."
DOWNGRADED = "Converted the consumer group to a classic group."


@pytest.fixture
def server(tmp_path):
    srv = start_group_server(tmp_path, dict(OVERRIDES, **{"metrics.port": "0"}), name="migration")
    yield srv
    srv.stop()


def classic(server, group, topic, name, client="kafka-python"):
    return procs.python_consumer(client, server.bootstrap, group, topic, name)


def modern(server, group, topic, name):
    return procs.python_consumer("confluent", server.bootstrap, group, topic, name, group_protocol="consumer")


def wait_cover(consumers, what: str) -> None:
    wait_until(lambda: all(c.alive for c in consumers) and all(c.assignment for c in consumers)
               and disjoint_cover([c.assignment for c in consumers], PARTITIONS), 90,
               f"{what}: disjoint assignments covering every partition\n" + "\n".join(c.describe() for c in consumers))


def describe(server, group):
    with KafkaWireClient.connect(server.bootstrap) as client:
        (modern_view,) = client.request(m.ConsumerGroupDescribeRequest(group_ids=[group],
                                                                       include_authorized_operations=False)).groups
        (classic_view,) = client.request(m.DescribeGroupsRequest(groups=[group],
                                                                 include_authorized_operations=False), 5).groups
    return modern_view, classic_view


def rebalances(server, group: str, cause: str) -> float:
    """kcoord_group_rebalances_total{group, cause}: the event sink's count (coordinator/events.py)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics").read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("kcoord_group_rebalances_total{") and f'group="{group}"' in line
               and f'cause="{cause}"' in line)


@pytest.mark.parametrize("classic_client", ["kafka-python", "confluent"])
def test_mixed_group_upgrades_and_downgrades_as_members_come_and_go(server, classic_client):
    """The acceptance test of issue 15 with kafka-python as the classic client; confluent-kafka with
    `group.protocol=classic` (librdkafka's own JoinGroup/SyncGroup) as a second one."""
    topic, group = "mixed", "mixed-group"
    server.create_topic(topic, PARTITIONS)
    producer = KeyedProducer(server.bootstrap, topic)
    everyone = []
    try:
        k1, k2 = classic(server, group, topic, "k1", classic_client), classic(server, group, topic, "k2", classic_client)
        everyone += [k1, k2]
        wait_cover([k1, k2], "a classic group of two kafka-python members")
        assert UPGRADED not in server.log_text()

        c1 = modern(server, group, topic, "c1")
        everyone.append(c1)
        wait_cover([k1, k2, c1], "the consumer-protocol member joined: the group upgraded")
        assert UPGRADED in server.log_text()
        modern_view, classic_view = describe(server, group)
        # ConsumerGroupDescribe shows the classic members too; DescribeGroups (v5) sees no classic group
        # (GroupMetadataManager.describeGroups: "Dead").
        assert modern_view.error_code == ErrorCode.NONE and len(modern_view.members) == 3
        assert classic_view.group_state == "Dead" and classic_view.members == []

        c1.terminate()  # leaves (epoch -1): the last consumer-protocol member, so the group downgrades
        wait_cover([k1, k2], "the consumer-protocol member left: the group downgraded")
        wait_until(lambda: DOWNGRADED in server.log_text(), 30, "the downgrade")
        modern_view, classic_view = describe(server, group)
        assert modern_view.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert classic_view.protocol_type == "consumer" and len(classic_view.members) == 2

        c2 = modern(server, group, topic, "c2")  # and up again
        everyone.append(c2)
        wait_cover([k1, k2, c2], "a second upgrade")
        assert server.log_text().count(UPGRADED) == 2
        # each upgrade's and downgrade's epoch bump is told to the event sink as "migration"
        assert rebalances(server, group, "migration") == 3

        sent = producer.stop()
        wait_until(lambda: {k for c in everyone for _p, _o, k in c.records()} >= set(sent), 90,
                   "every produced record consumed\n" + "\n".join(c.describe() for c in everyone))
        assert_no_redelivery_after_commit(everyone)
        # the coordinator never gave a partition to a member while another still owned it
        # (ConsumerGroup would have logged PartitionOwnedTwice)
        assert "still owned by another member" not in server.log_text()
    finally:
        producer.stop()
        procs.stop_all(everyone)


def test_upgraded_group_survives_a_restart(server):
    """The upgrade is records like any other: a server SIGKILLed after it replays them on load and the
    group is still a consumer group with its classic members (GroupCoordinatorShard.replay)."""
    topic, group = "mixed-restart", "mixed-restart-group"
    server.create_topic(topic, PARTITIONS)
    members = [classic(server, group, topic, "k1")]
    try:
        wait_cover(members, "a classic group")
        members.append(modern(server, group, topic, "c1"))
        wait_cover(members, "upgraded")
        before, _ = describe(server, group)
    finally:
        for member in members:  # killed: no LeaveGroup, the members stay in the log
            member.kill()
    server.restart(signal.SIGKILL)
    after, _ = describe(server, group)
    assert after.error_code == ErrorCode.NONE
    assert after.group_epoch == before.group_epoch
    assert sorted(mm.member_id for mm in after.members) == sorted(mm.member_id for mm in before.members)


def test_dead_members_are_fenced_and_the_group_downgrades(server):
    """SIGKILLed members send no leave: a kafka-python member of the consumer group is fenced after its own
    session timeout (convertToConsumerGroup schedules classicProtocolSessionTimeout), the consumer-protocol member
    after group.consumer.session.timeout.ms -- and being the last one, its expiry downgrades the group
    (consumerGroupFenceMemberOperation -> consumerGroupFenceMember -> convertToClassicGroup)."""
    topic, group = "mixed-dead", "mixed-dead-group"
    server.create_topic(topic, PARTITIONS)
    k1, k2 = classic(server, group, topic, "k1"), classic(server, group, topic, "k2")
    everyone = [k1, k2]
    try:
        wait_cover([k1, k2], "a classic group")
        c1 = modern(server, group, topic, "c1")
        everyone.append(c1)
        wait_cover([k1, k2, c1], "upgraded")
        k2.kill()
        wait_cover([k1, c1], "the dead kafka-python member fenced")
        assert "fenced from the group because the member session expired" in server.log_text()
        assert DOWNGRADED not in server.log_text()
        c1.kill()
        wait_until(lambda: DOWNGRADED in server.log_text(), 60, "the downgrade after the session expiry")
        wait_cover([k1], "the kafka-python member alone in the classic group")
        _modern_view, classic_view = describe(server, group)
        assert classic_view.group_state == "Stable" and [mm.client_id for mm in classic_view.members] == ["k1"]
    finally:
        procs.stop_all(everyone)
