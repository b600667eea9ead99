"""Classic admin APIs aimed at a consumer group that has members of both protocols (online migration), over
the wire against a real server: LeaveGroup as an admin's removal and DescribeGroups. Each test cites the Kafka
source it follows (group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
unless said otherwise)."""
from __future__ import annotations

import uuid

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.groups.rawgroup import TOPIC
from tests.broker.groups.test_migration_wire import classic_group, close, start

CGH = m.ConsumerGroupHeartbeatRequest


@pytest.fixture
def server(tmp_path):
    srv = start(tmp_path)
    yield srv
    srv.stop()


def join_consumer(client, group, instance_id=None):
    """A consumer-protocol member joins (epoch 0) with the client-generated id of v1 (KIP-1082)."""
    got = client.request(CGH(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=instance_id,
                             rack_id=None, rebalance_timeout_ms=30000, subscribed_topic_names=[TOPIC],
                             subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]), 1)
    assert got.error_code == E.NONE, got
    return got


def consumer_heartbeat(client, group, member_id, epoch, instance_id=None):
    return client.request(CGH(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
                              rack_id=None, rebalance_timeout_ms=-1, subscribed_topic_names=None,
                              subscribed_topic_regex=None, server_assignor=None, topic_partitions=None), 1)


def leave(client, group, *members, version=5):
    identity = m.LeaveGroupRequest.MemberIdentity
    return client.request(m.LeaveGroupRequest(group_id=group, members=[
        identity(member_id=mid, group_instance_id=iid, reason="removed by an admin") for mid, iid in members]),
        version)


def described(client, group):
    (cg,) = client.request(m.ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                           1).groups
    return cg


@pytest.mark.parametrize("version", [3, 4, 5])
def test_admin_removes_a_consumer_protocol_static_member(server, version):
    """classicGroupLeaveToConsumerGroup (Kafka 4.0+, KAFKA-18188): member id "" + group instance id is an admin's
    removal (Admin.removeMembersFromConsumerGroup, kafka-consumer-groups --delete): the static member using the
    consumer protocol is found by its instance id (throwIfStaticMemberIsUnknown; the fenced check skipped for
    UNKNOWN_MEMBER_ID), no longer refused for not using the classic protocol, and the answer echoes the request's
    identity (member id ""). consumerGroupFenceMembers removes it and bumps the group epoch once; its next
    ConsumerGroupHeartbeat is UNKNOWN_MEMBER_ID. An unknown instance id is UNKNOWN_MEMBER_ID, a wrong member id
    for a known one FENCED_INSTANCE_ID (throwIfInstanceIdIsFenced)."""
    members = classic_group(server, "adm")
    try:
        with KafkaWireClient.connect(server.bootstrap) as client:
            static = join_consumer(client, "adm", instance_id="static-1")
            dynamic = join_consumer(client, "adm")  # a second consumer-protocol member: the group stays consumer
            epoch = described(client, "adm").group_epoch
            got = leave(client, "adm", ("", "static-1"), ("", "nobody"), ("not-him", "static-1"), version=version)
            assert got.error_code == E.NONE
            assert [(x.member_id, x.group_instance_id, x.error_code) for x in got.members] == [
                ("", "static-1", E.NONE), ("", "nobody", E.UNKNOWN_MEMBER_ID),
                ("not-him", "static-1", E.FENCED_INSTANCE_ID)]  # validated before anyone is removed
            after = described(client, "adm")
            assert after.group_epoch == epoch + 1
            assert static.member_id not in {mm.member_id for mm in after.members}
            assert {dynamic.member_id, *(mm.member_id for mm in members)} == {mm.member_id for mm in after.members}
            gone = consumer_heartbeat(client, "adm", static.member_id, static.member_epoch, "static-1")
            assert gone.error_code == E.UNKNOWN_MEMBER_ID
            fenced = leave(client, "adm", ("not-him", None), (members[0].member_id, "no-such"), version=version)
            assert [x.error_code for x in fenced.members] == [E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    finally:
        close(members)


def test_a_known_instance_with_another_member_id_is_fenced(server):
    """throwIfInstanceIdIsFenced: a member id that is not "" and not the instance's current member's:
    FENCED_INSTANCE_ID; nothing is written (consumerGroupFenceMembers with no member: no epoch bump)."""
    members = classic_group(server, "fen")
    try:
        with KafkaWireClient.connect(server.bootstrap) as client:
            join_consumer(client, "fen", instance_id="static-1")
            epoch = described(client, "fen").group_epoch
            got = leave(client, "fen", ("someone-else", "static-1"))
            assert [(x.member_id, x.error_code) for x in got.members] == [("someone-else", E.FENCED_INSTANCE_ID)]
            assert described(client, "fen").group_epoch == epoch
    finally:
        close(members)


def test_removing_the_last_consumer_protocol_member_downgrades(server):
    """KAFKA-18150 (Kafka 4.0): classicGroupLeaveToConsumerGroup -> consumerGroupFenceMembers ->
    validateOnlineDowngradeWithFencedMembers / convertToClassicGroup: the admin removes the only member using the
    consumer protocol, so the group becomes a classic group of the classic members (DescribeGroups sees it,
    PreparingRebalance) and ConsumerGroupDescribe no longer does (GROUP_ID_NOT_FOUND)."""
    members = classic_group(server, "last")
    try:
        with KafkaWireClient.connect(server.bootstrap) as client:
            join_consumer(client, "last", instance_id="static-1")
            got = leave(client, "last", ("", "static-1"))
            assert [(x.member_id, x.error_code) for x in got.members] == [("", E.NONE)]
            assert described(client, "last").error_code == E.GROUP_ID_NOT_FOUND
            (classic,) = client.request(m.DescribeGroupsRequest(groups=["last"], include_authorized_operations=False),
                                        5).groups
            assert (classic.error_code, classic.group_state, classic.protocol_type) == (
                E.NONE, "PreparingRebalance", "consumer")
            assert sorted(mm.member_id for mm in classic.members) == sorted(mm.member_id for mm in members)
    finally:
        close(members)


def test_describe_groups_on_a_consumer_group_at_every_version(server):
    """GroupMetadataManager.describeGroups: classicGroup(groupId) throws GroupIdNotFoundException("Group X is not
    a classic group.") for a consumer group; from v6 (KIP-1043) that is GROUP_ID_NOT_FOUND with that message and
    state "Dead", before v6 only state "Dead" with no error. Either way no protocol and no members (its classic
    members included: ConsumerGroupDescribe describes them). KafkaApis.handleDescribeGroupsRequest fills the
    authorized operations (v3+, when asked) only for groups answered without an error."""
    members = classic_group(server, "mixed")
    try:
        with KafkaWireClient.connect(server.bootstrap) as client:
            join_consumer(client, "mixed")
            client.best_version(15)  # fetches ApiVersions
            low, high = client.versions[15]
            assert (low, high) == (0, 6)
            for version in range(low, high + 1):
                (group,) = client.request(m.DescribeGroupsRequest(groups=["mixed"], include_authorized_operations=True),
                                          version).groups
                got = (group.error_code, group.group_state, group.protocol_type, group.protocol_data, group.members)
                if version >= 6:
                    assert got == (E.GROUP_ID_NOT_FOUND, "Dead", "", "", []), version
                    assert group.error_message == "Group mixed is not a classic group."
                    assert group.authorized_operations == -(2**31)
                else:
                    assert got == (E.NONE, "Dead", "", "", []), version
                    if version >= 3:  # READ, DELETE, DESCRIBE: no authorizer configured
                        assert group.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8), version
            (unknown,) = client.request(m.DescribeGroupsRequest(groups=["nobody-here"],
                                                                include_authorized_operations=False), 6).groups
            assert (unknown.error_code, unknown.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nobody-here not found.")
    finally:
        close(members)
