"""Online migration's conditions and errors over the wire (raw requests, real server). Each test cites the
Kafka source it follows (group-coordinator/src/main/java/org/apache/kafka/coordinator/group/
GroupMetadataManager.java unless said otherwise)."""
from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.groups.group_server import GROUP_TEST_OVERRIDES, start_group_server
from tests.broker.groups.rawgroup import TOPIC, Member, assignment, subscription
from tests.broker.groups.test_admin_and_cli import kcoord_groups

CGH = m.ConsumerGroupHeartbeatRequest


def start(tmp_path, **overrides):
    props = dict(GROUP_TEST_OVERRIDES, **{k.replace("_", "."): str(v) for k, v in overrides.items()})
    srv = start_group_server(tmp_path, props, name="migration-wire")
    srv.create_topic(TOPIC, 4)
    return srv


@pytest.fixture
def server(tmp_path):
    srv = start(tmp_path)
    yield srv
    srv.stop()


def classic_group(server, group, n=2, protocol_type="consumer"):
    """A Stable classic group of `n` raw members (the first is the leader and assigns)."""
    members = [Member(server.bootstrap, group, 9) for _ in range(n)]
    for member in members:  # v9: MEMBER_ID_REQUIRED first
        assert join(member, protocol_type).error_code == E.MEMBER_ID_REQUIRED
    for member in members:
        member.client.send(join_request(member, protocol_type), 9)
    answers = [member.receive_join() for member in members]
    assert all(a.error_code == E.NONE for a in answers), answers
    leader = next(mm for mm, a in zip(members, answers, strict=True) if a.leader == mm.member_id)
    share = {mm.member_id: assignment(range(i, 4, n)) for i, mm in enumerate(members)}
    for member in members:
        member.send_sync(share if member is leader else {}, protocol_type=protocol_type)
    assert all(member.client.receive().error_code == E.NONE for member in members)
    return members


def join_request(member, protocol_type="consumer", protocols=None):
    protocols = protocols or [("range", subscription())]
    return m.JoinGroupRequest(
        group_id=member.group, session_timeout_ms=member.session_timeout_ms,
        rebalance_timeout_ms=member.rebalance_timeout_ms, member_id=member.member_id, group_instance_id=None,
        protocol_type=protocol_type,
        protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=md) for n, md in protocols],
        reason=None)


def join(member, protocol_type="consumer", protocols=None):
    member.client.send(join_request(member, protocol_type, protocols), 9)
    return member.receive_join()


def heartbeat(server, group, member_id="", epoch=0):
    with KafkaWireClient.connect(server.bootstrap) as client:
        return client.request(CGH(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None,
                                  rack_id=None, rebalance_timeout_ms=30000 if epoch == 0 else -1,
                                  subscribed_topic_names=[TOPIC] if epoch == 0 else None, subscribed_topic_regex=None,
                                  server_assignor=None, topic_partitions=[] if epoch == 0 else None))


def close(members):
    for member in members:
        member.close()


def test_upgrade_refused_when_the_policy_disables_it(tmp_path):
    """validateOnlineUpgrade: group.consumer.migration.policy=disabled (or downgrade) refuses the upgrade of a
    non-empty classic group: GROUP_ID_NOT_FOUND, "... because online upgrade is disabled."."""
    srv = start(tmp_path, group_consumer_migration_policy="disabled")
    members = classic_group(srv, "pol")
    try:
        got = heartbeat(srv, "pol")
        assert got.error_code == E.GROUP_ID_NOT_FOUND
        assert got.error_message == "Cannot upgrade classic group pol to consumer group because online upgrade is disabled."
        assert all(member.heartbeat() == E.NONE for member in members)  # the classic group carries on
    finally:
        close(members)
        srv.stop()


def test_upgrade_refused_for_a_non_consumer_protocol_type(server):
    """validateOnlineUpgrade: ClassicGroup.usesConsumerGroupProtocol is false (protocol type "connect"):
    GROUP_ID_NOT_FOUND, "... because the group does not use the consumer embedded protocol."."""
    members = classic_group(server, "connect-group", protocol_type="connect")
    try:
        got = heartbeat(server, "connect-group")
        assert got.error_code == E.GROUP_ID_NOT_FOUND
        assert "does not use the consumer embedded protocol" in got.error_message
    finally:
        close(members)


def test_upgrade_refused_when_the_group_is_too_large(tmp_path):
    """validateOnlineUpgrade: more classic members than group.consumer.max.size: GROUP_ID_NOT_FOUND."""
    srv = start(tmp_path, group_consumer_max_size=1)
    members = classic_group(srv, "big")
    try:
        got = heartbeat(srv, "big")
        assert got.error_code == E.GROUP_ID_NOT_FOUND
        assert "exceeds the consumer group maximum size" in got.error_message
    finally:
        close(members)
        srv.stop()


def test_classic_requests_to_an_upgraded_group(server):
    """After the upgrade (convertToConsumerGroup) the classic members are served by the consumer group:
    classicGroupHeartbeatToConsumerGroup answers REBALANCE_IN_PROGRESS (the group epoch moved on) and
    ILLEGAL_GENERATION (throwIfGenerationIdUnmatched); classicGroupJoinToConsumerGroup refuses another protocol
    type (throwIfClassicProtocolIsNotSupported: INCONSISTENT_GROUP_PROTOCOL) and gives a rejoining member its
    member epoch as generation; classicGroupSyncToConsumerGroup answers ILLEGAL_GENERATION and then the member's
    partitions in ConsumerProtocolAssignment; DescribeGroups v6 does not see a classic group (describeGroups:
    Dead, GROUP_ID_NOT_FOUND); ConsumerGroupDescribe (ConsumerGroup.asDescribedGroup) and `kcoord groups
    describe` list every member, classic ones included."""
    members = classic_group(server, "up")
    a, b = members
    try:
        got = heartbeat(server, "up")
        assert got.error_code == E.NONE and got.member_epoch == a.generation_id + 1
        assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
        assert a.heartbeat(generation_id=a.generation_id + 9) == E.ILLEGAL_GENERATION
        stranger = Member(server.bootstrap, "up", 9)
        try:
            refused = join(stranger, protocol_type="connect")
            assert refused.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        finally:
            stranger.close()
        rejoined = join(a)
        assert rejoined.error_code == E.NONE and rejoined.protocol_type == "consumer"
        old_generation = a.generation_id
        a.generation_id = old_generation + 5
        assert a.sync().error_code == E.ILLEGAL_GENERATION
        a.generation_id = old_generation
        synced = a.sync()
        assert synced.error_code == E.NONE
        decoded = m.decode_versioned("ConsumerProtocolAssignment", synced.assignment)[0]
        assert all(tp.topic == TOPIC for tp in decoded.assigned_partitions)
        with KafkaWireClient.connect(server.bootstrap) as client:
            (described,) = client.request(m.DescribeGroupsRequest(groups=["up"], include_authorized_operations=False),
                                          6).groups
            assert (described.error_code, described.group_state) == (E.GROUP_ID_NOT_FOUND, "Dead")
            (cg,) = client.request(m.ConsumerGroupDescribeRequest(group_ids=["up"],
                                                                  include_authorized_operations=False), 1).groups
            assert cg.error_code == E.NONE
            # v1's MemberType (KIP-1099, ConsumerGroupMember.asConsumerGroupDescribeMember): 0 classic, 1 consumer
            assert sorted((mm.member_id, mm.member_type) for mm in cg.members) == sorted(
                [(a.member_id, 0), (b.member_id, 0), (got.member_id, 1)])
        out = kcoord_groups(server.bootstrap, "describe", "up")  # the CLI shows the mixed group's members
        assert out.returncode == 0, out.stderr
        assert "Consumer group 'up'" in out.stdout
        assert all(mid in out.stdout for mid in (a.member_id, b.member_id, got.member_id)), out.stdout
    finally:
        close(members)


def test_leave_of_the_last_consumer_member_downgrades(server):
    """consumerGroupLeave -> consumerGroupFenceMember -> validateOnlineDowngradeWithFencedMember /
    convertToClassicGroup: the classic group is back (DescribeGroups answers it), Stable then rebalancing, and its
    members rejoin at a generation above the consumer group's epoch."""
    members = classic_group(server, "down")
    try:
        joined = heartbeat(server, "down")
        left = heartbeat(server, "down", joined.member_id, -1)
        assert left.error_code == E.NONE and left.member_epoch == -1
        with KafkaWireClient.connect(server.bootstrap) as client:
            (described,) = client.request(m.DescribeGroupsRequest(groups=["down"],
                                                                  include_authorized_operations=False), 5).groups
        assert described.error_code == E.NONE and described.protocol_type == "consumer"
        assert described.group_state == "PreparingRebalance"
        assert members[0].heartbeat(generation_id=joined.member_epoch) == E.REBALANCE_IN_PROGRESS
        for member in members:
            member.client.send(join_request(member), 9)
        answers = [member.receive_join() for member in members]
        assert all(a.error_code == E.NONE and a.generation_id == joined.member_epoch + 1 for a in answers), answers
    finally:
        close(members)
