"""Kafka 4 loads `__consumer_offsets` partitions after it starts serving: the port is open, groups of
loaded partitions are served, and a group whose partition is still loading gets each API's loading
answer. A real server (subprocess) restarted on its own data, then its partitions loaded again in order
with one of them held (the admin endpoint's /coordinator/hold-load and /coordinator/reload), so the
loading window is seen deterministically over TCP.

Each API's answer follows Kafka's GroupCoordinatorService (group-coordinator/src/main/java/org/apache/
kafka/coordinator/group/GroupCoordinatorService.java): the runtime fails the operation of a loading
shard with COORDINATOR_LOAD_IN_PROGRESS and each method's `exceptionally(handleOperationException(...))`
puts it where its response carries errors; `heartbeat` alone turns it into NONE."""
from __future__ import annotations

import time

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.consumer_offsets import partition_for
from kcoord.protocol.errors import ErrorCode as E
from tests.support.kcoord_server import KcoordServer

LOADING = E.COORDINATOR_LOAD_IN_PROGRESS
TOPIC = "loading-t"
BOUND_S = 30


def _group_in(partition_above: int) -> tuple[str, int]:
    for i in range(10_000):
        name = f"held-{i}"
        p = partition_for(name, 50)
        if p > partition_above:
            return name, p
    raise AssertionError("no group id found")


SERVED, SERVED_PARTITION = next((f"served-{i}", partition_for(f"served-{i}", 50)) for i in range(1000)
                                if partition_for(f"served-{i}", 50) < 10)
HELD, HELD_PARTITION = _group_in(SERVED_PARTITION)


def _commit(c: KafkaWireClient, group: str, offset: int):
    topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
    return c.request(m.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        topic(name=TOPIC, partitions=[topic.OffsetCommitRequestPartition(partition_index=0,
                                                                         committed_offset=offset)])]), 8)


def _fetch(c: KafkaWireClient, group: str):
    return c.request(m.OffsetFetchRequest(groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=group, topics=None)]), 8).groups[0]


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """A server whose partition of HELD is loading (held), every partition before it loaded."""
    workdir = tmp_path_factory.mktemp("loading")
    srv = KcoordServer(workdir, {"group.initial.rebalance.delay.ms": "0", "num.partitions": "1",
                                 "kcoord.admin.listener": "http://127.0.0.1:0"})
    try:
        srv.start()
        with KafkaWireClient.connect(srv.bootstrap) as c:
            c.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                        allow_auto_topic_creation=True), 9)
            for group, offset in ((SERVED, 11), (HELD, 22)):
                # the first start loads its (empty) partitions after the port opens: retry as a client does
                deadline = time.monotonic() + BOUND_S
                while (error := _commit(c, group, offset).topics[0].partitions[0].error_code) == LOADING:
                    assert time.monotonic() < deadline, f"{group}'s partition still loading"
                    time.sleep(0.05)
                assert error == E.NONE
        srv.stop()
        srv.start()  # (returns once every partition is loaded: it asks the admin endpoint)
        assert srv.hold_load([HELD_PARTITION]) == [HELD_PARTITION]
        srv.reload()  # every partition loads again from the log, in order; HELD's waits
        yield srv
    finally:
        srv.stop()


def _request(srv, body, version):
    with KafkaWireClient.connect(srv.bootstrap) as c:
        return c.request(body, version)


def test_port_is_open_and_loaded_partitions_serve_while_another_loads(held):
    deadline = time.monotonic() + BOUND_S
    with KafkaWireClient.connect(held.bootstrap) as c:
        # the partitions before the held one load right after the port opened
        while (served := _fetch(c, SERVED)).error_code == LOADING and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (served.error_code, served.topics[0].partitions[0].committed_offset) == (E.NONE, 11)
        assert _fetch(c, HELD).error_code == LOADING


JOIN = m.JoinGroupRequest(group_id=HELD, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                          protocol_type="consumer", protocols=[
                              m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
SYNC = m.SyncGroupRequest(group_id=HELD, generation_id=1, member_id="m", protocol_type="consumer",
                          protocol_name="range", assignments=[])
LEAVE = m.LeaveGroupRequest(group_id=HELD, members=[m.LeaveGroupRequest.MemberIdentity(member_id="m")])
OFFSET_DELETE = m.OffsetDeleteRequest(group_id=HELD, topics=[m.OffsetDeleteRequest.OffsetDeleteRequestTopic(
    name=TOPIC, partitions=[m.OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
        partition_index=0)])])


def test_join_group_while_loading(held):
    """joinGroup: scheduleWriteOperation("classic-group-join") fails; handleOperationException answers
    JoinGroupResponseData().setErrorCode(COORDINATOR_LOAD_IN_PROGRESS)."""
    assert _request(held, JOIN, 5).error_code == LOADING


def test_sync_group_while_loading(held):
    """syncGroup: handleOperationException's default: the error as is (no REBALANCE_IN_PROGRESS since the
    rewrite of the coordinator)."""
    assert _request(held, SYNC, 5).error_code == LOADING


def test_heartbeat_while_loading(held):
    """heartbeat: `if (error == Errors.COORDINATOR_LOAD_IN_PROGRESS)` -> NONE: "The group is still
    loading, so blindly respond"."""
    assert _request(held, m.HeartbeatRequest(group_id=HELD, generation_id=1, member_id="m"), 4).error_code == E.NONE


def test_leave_group_while_loading(held):
    """leaveGroup: a top-level error (only UNKNOWN_MEMBER_ID is answered per member)."""
    r = _request(held, LEAVE, 3)
    assert (r.error_code, r.members) == (LOADING, [])


def test_offset_commit_while_loading(held):
    """commitOffsets: OffsetCommitRequest.getErrorResponse(request, error): every partition."""
    with KafkaWireClient.connect(held.bootstrap) as c:
        assert _commit(c, HELD, 99).topics[0].partitions[0].error_code == LOADING


def test_offset_fetch_while_loading(held):
    """fetchOffsets / fetchAllOffsets: the read operation fails and KafkaApis answers the group with the
    error (v8+: per group; v2-v7: top level, no topics)."""
    with KafkaWireClient.connect(held.bootstrap) as c:
        assert (_fetch(c, HELD).error_code, _fetch(c, HELD).topics) == (LOADING, [])
        v7 = c.request(m.OffsetFetchRequest(group_id=HELD, topics=None), 7)
        assert (v7.error_code, v7.topics) == (LOADING, [])


def test_describe_groups_while_loading(held):
    """describeGroups: DescribeGroupsRequest.getErrorDescribedGroupList(groupList, error): the group with
    the error and empty state, protocol and members."""
    g, = _request(held, m.DescribeGroupsRequest(groups=[HELD]), 5).groups
    assert (g.group_id, g.error_code, g.group_state, g.protocol_type, g.members) == (HELD, LOADING, "", "", [])


def test_list_groups_while_loading(held):
    """listGroups: scheduleReadAllOperation over every shard; one that fails other than NOT_COORDINATOR
    fails the whole answer: ListGroupsResponseData().setErrorCode(error), no groups."""
    r = _request(held, m.ListGroupsRequest(), 4)
    assert (r.error_code, r.groups) == (LOADING, [])


def test_delete_groups_while_loading(held):
    """deleteGroups: DeleteGroupsRequest.getErrorResultCollection(groupList, error): per group."""
    r = _request(held, m.DeleteGroupsRequest(groups_names=[HELD]), 2)
    assert [(x.group_id, x.error_code) for x in r.results] == [(HELD, LOADING)]


def test_offset_delete_while_loading(held):
    """deleteOffsets: OffsetDeleteResponseData().setErrorCode(error): top level, no topics."""
    r = _request(held, OFFSET_DELETE, 0)
    assert (r.error_code, r.topics) == (LOADING, [])


def test_the_held_partition_serves_its_committed_offsets_once_loaded(held):
    assert held.release_load() == []
    deadline = time.monotonic() + BOUND_S
    with KafkaWireClient.connect(held.bootstrap) as c:
        while (got := _fetch(c, HELD)).error_code == LOADING and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (got.error_code, got.topics[0].partitions[0].committed_offset) == (E.NONE, 22)
        assert _request(held, m.ListGroupsRequest(), 4).error_code == E.NONE
