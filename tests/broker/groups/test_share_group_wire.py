"""Share groups (KIP-932), the group side, over the wire: ShareGroupHeartbeat / ShareGroupDescribe errors,
ListGroups / DescribeGroups / DeleteGroups / JoinGroup on a share group, and a confluent-kafka
ShareConsumer joining and getting its assignment. Each test cites the Kafka 4.2 source it follows
(group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java unless
said otherwise)."""
from __future__ import annotations

import time

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.groups.group_server import start_group_server

TOPIC = "share-topic"
SGH, SGD = m.ShareGroupHeartbeatRequest, m.ShareGroupDescribeRequest


@pytest.fixture
def server(tmp_path):
    srv = start_group_server(tmp_path, name="share-wire")
    srv.create_topic(TOPIC, 2)
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    with KafkaWireClient.connect(server.bootstrap, timeout=30, client_id="share-wire") as c:
        yield c


def heartbeat(client, group, member_id, epoch, topics=None, rack=None):
    return client.request(SGH(group_id=group, member_id=member_id, member_epoch=epoch, rack_id=rack,
                              subscribed_topic_names=topics), 1)


def describe(client, *groups):
    return client.request(SGD(group_ids=list(groups), include_authorized_operations=False), 1).groups


def test_heartbeat_invalid_requests(client):
    """throwIfShareGroupHeartbeatRequestIsInvalid: INVALID_REQUEST with Kafka's messages."""
    cases = [(("", "m", 0, [TOPIC]), "GroupId can't be empty."),
             (("g", "", 0, [TOPIC]), "MemberId can't be empty."),
             (("g", "m", 0, None), "SubscribedTopicNames must be set in first request."),
             (("g", "m", -2, None), "MemberEpoch is invalid."),
             (("g", "m", 0, [TOPIC], ""), "RackId can't be empty.")]
    for args, message in cases:
        resp = heartbeat(client, *args)
        assert (resp.error_code, resp.error_message) == (E.INVALID_REQUEST, message)


def test_heartbeat_member_errors(client):
    """getOrMaybeCreatePersistedShareGroup (no group: GROUP_ID_NOT_FOUND), ShareGroup.getOrMaybeCreateMember
    (UNKNOWN_MEMBER_ID), throwIfShareGroupMemberEpochIsInvalid (FENCED_MEMBER_EPOCH)."""
    assert heartbeat(client, "sg-errors", "m1", 1).error_code == E.GROUP_ID_NOT_FOUND
    joined = heartbeat(client, "sg-errors", "m1", 0, [TOPIC])
    assert (joined.error_code, joined.member_id, joined.member_epoch, joined.heartbeat_interval_ms) == (0, "m1", 1, 5000)
    assert sorted(p for tp in joined.assignment.topic_partitions for p in tp.partitions) == [0, 1]
    assert heartbeat(client, "sg-errors", "other", 1).error_code == E.UNKNOWN_MEMBER_ID
    assert heartbeat(client, "sg-errors", "m1", 7).error_code == E.FENCED_MEMBER_EPOCH
    left = heartbeat(client, "sg-errors", "m1", -1)
    assert (left.error_code, left.member_id, left.member_epoch) == (0, "m1", -1)
    assert heartbeat(client, "sg-errors", "m1", 1).error_code == E.UNKNOWN_MEMBER_ID


def test_group_type_exclusivity(client):
    """A classic group's id is not a share group's (getOrMaybeCreatePersistedShareGroup: "Group X is not a share
    group."), and a share group's id refuses JoinGroup (classicGroupJoin: INCONSISTENT_GROUP_PROTOCOL)."""
    client.request(m.OffsetCommitRequest(group_id="classic-id", generation_id_or_member_epoch=-1, member_id="",
                                         group_instance_id=None, retention_time_ms=-1, topics=[
        m.OffsetCommitRequest.OffsetCommitRequestTopic(name=TOPIC, partitions=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, commit_timestamp=-1,
                committed_metadata="")])]), 8)
    resp = heartbeat(client, "classic-id", "m1", 0, [TOPIC])
    assert (resp.error_code, resp.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic-id is not a share group.")
    (g,) = describe(client, "classic-id")
    assert (g.error_code, g.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic-id is not a share group.")
    assert heartbeat(client, "sg-x", "m1", 0, [TOPIC]).error_code == 0
    join = client.request(m.JoinGroupRequest(
        group_id="sg-x", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="", group_instance_id=None,
        protocol_type="consumer", protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
        reason=None), 9)
    assert join.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_describe_list_and_delete(client):
    """shareGroupDescribe (unknown: GROUP_ID_NOT_FOUND "Group X not found."; "" INVALID_GROUP_ID at the front
    door), ListGroups with type "share" and a state filter, DescribeGroups on a share group (describeGroups:
    not a classic group -- Dead, GROUP_ID_NOT_FOUND from v6), DeleteGroups (NON_EMPTY_GROUP, then deleted)."""
    (unknown, empty) = describe(client, "nope", "")
    assert (unknown.error_code, unknown.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert empty.error_code == E.INVALID_GROUP_ID
    heartbeat(client, "sg-d", "a", 0, [TOPIC])
    second = heartbeat(client, "sg-d", "b", 0, [TOPIC])
    first = heartbeat(client, "sg-d", "a", 1)
    (g,) = describe(client, "sg-d")
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (0, "Stable", 2, 2, "simple")
    owned = {mm.member_id: [(tp.topic_name, tp.partitions) for tp in mm.assignment.topic_partitions] for mm in g.members}
    assert owned == {"a": [(TOPIC, [p for tp in first.assignment.topic_partitions for p in tp.partitions])],
                     "b": [(TOPIC, [p for tp in second.assignment.topic_partitions for p in tp.partitions])]}
    listed = client.request(m.ListGroupsRequest(states_filter=["Stable"], types_filter=["share"]), 5).groups
    assert [(lg.group_id, lg.protocol_type, lg.group_state, lg.group_type) for lg in listed] == [
        ("sg-d", "share", "Stable", "share")]
    (v5,) = client.request(m.DescribeGroupsRequest(groups=["sg-d"], include_authorized_operations=False), 5).groups
    assert (v5.error_code, v5.group_state) == (0, "Dead")
    (v6,) = client.request(m.DescribeGroupsRequest(groups=["sg-d"], include_authorized_operations=False), 6).groups
    assert (v6.error_code, v6.error_message) == (E.GROUP_ID_NOT_FOUND, "Group sg-d is not a classic group.")
    deleted = client.request(m.DeleteGroupsRequest(groups_names=["sg-d"]), 2).results
    assert [(d.group_id, d.error_code) for d in deleted] == [("sg-d", E.NON_EMPTY_GROUP)]
    heartbeat(client, "sg-d", "a", 2)
    assert heartbeat(client, "sg-d", "a", -1).error_code == 0
    assert heartbeat(client, "sg-d", "b", -1).error_code == 0
    (g,) = describe(client, "sg-d")
    assert (g.group_state, g.members) == ("Empty", [])
    deleted = client.request(m.DeleteGroupsRequest(groups_names=["sg-d"]), 2).results
    assert [(d.group_id, d.error_code) for d in deleted] == [("sg-d", 0)]
    assert describe(client, "sg-d")[0].error_code == E.GROUP_ID_NOT_FOUND


def test_find_coordinator_for_a_share_group(client):
    """Share consumers find their group's coordinator with key type 0 (GROUP), as any group."""
    resp = client.request(m.FindCoordinatorRequest(key="sg-any", key_type=0, coordinator_keys=["sg-any"]), 4)
    assert [c.error_code for c in resp.coordinators] == [0]


def test_confluent_share_consumer_joins_and_gets_an_assignment(server, client):
    """confluent-kafka's ShareConsumer (librdkafka 2.16) joins with ShareGroupHeartbeat v1 and gets both partitions;
    ShareFetch is not served yet (issue 28), so only the membership is checked (ShareGroupDescribe)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer")
    consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": server.bootstrap, "group.id": "sg-confluent",
                                              "client.id": "share-client", "log_level": 3})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        g = None
        while time.monotonic() < deadline:
            consumer.poll(0.2)
            (g,) = describe(client, "sg-confluent")
            if g.error_code == 0 and g.members and g.members[0].assignment.topic_partitions:
                break
        assert g is not None and g.error_code == 0, g
        (member,) = g.members
        assert (member.client_id, member.subscribed_topic_names, member.member_epoch) == ("share-client", [TOPIC], 1)
        assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [(TOPIC, [0, 1])]
    finally:
        consumer.close()
