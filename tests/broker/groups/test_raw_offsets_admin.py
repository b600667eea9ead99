"""FindCoordinator, OffsetCommit / OffsetFetch and the admin group APIs over the wire at their
versions' edges: batched keys, per-version error placement, unknown partitions, state filters."""
from __future__ import annotations

import itertools

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.groups.rawgroup import TOPIC as RAW_TOPIC
from tests.broker.groups.rawgroup import Member, assignment

_ids = itertools.count()
TOPIC = RAW_TOPIC  # the topic rawgroup members subscribe to


@pytest.fixture(scope="module", autouse=True)
def raw_topic(server):
    server.create_topic(TOPIC, 3)


@pytest.fixture
def client(server):
    with KafkaWireClient.connect(server.bootstrap) as c:
        yield c


def commit(client, group: str, offsets: dict[int, int], version: int, generation: int = -1, member: str = ""):
    topic_type = m.OffsetCommitRequest.OffsetCommitRequestTopic
    request = m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member, retention_time_ms=-1,
        topics=[topic_type(name=TOPIC, partitions=[topic_type.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=f"m{o}")
            for p, o in sorted(offsets.items())])])
    resp = client.request(request, version)
    return {p.partition_index: p.error_code for p in resp.topics[0].partitions}


def fetch(client, group: str, partitions: list[int] | None, version: int):
    topic_type = m.OffsetFetchRequest.OffsetFetchRequestTopic
    if version >= 8:
        group_type = m.OffsetFetchRequest.OffsetFetchRequestGroup
        topics = None if partitions is None else [
            group_type.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=partitions)]
        return client.request(m.OffsetFetchRequest(groups=[group_type(group_id=group, topics=topics)]), version)
    topics = None if partitions is None else [topic_type(name=TOPIC, partition_indexes=partitions)]
    return client.request(m.OffsetFetchRequest(group_id=group, topics=topics), version)


def offsets_of(topics) -> dict[int, tuple[int, str, int]]:
    return {p.partition_index: (p.committed_offset, p.metadata, p.error_code) for t in topics for p in t.partitions}


@pytest.mark.parametrize("version", range(0, 7))
def test_find_coordinator_every_version(server, client, version):
    host, port = server.bootstrap.split(":")
    if version >= 4:
        resp = client.request(m.FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"]), version)
        assert [(c.key, c.error_code, c.host, c.port) for c in resp.coordinators] == [
            ("g1", E.NONE, host, int(port)), ("g2", E.NONE, host, int(port))]
        # key type 1: the transaction coordinator, this node too (txn/)
        txn = client.request(m.FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]), version)
        assert [(c.error_code, c.port) for c in txn.coordinators] == [(E.NONE, int(port))]
    else:
        resp = client.request(m.FindCoordinatorRequest(key="g1", key_type=0), version)
        assert (resp.error_code, resp.host, resp.port) == (E.NONE, host, int(port))
        if version >= 1:
            txn = client.request(m.FindCoordinatorRequest(key="tx", key_type=1), version)
            assert (txn.error_code, txn.port) == (E.NONE, int(port))


@pytest.mark.parametrize("commit_version", [2, 5, 7, 8, 9])
@pytest.mark.parametrize("fetch_version", [1, 2, 5, 7, 8, 9])
def test_commit_then_fetch_across_versions(client, commit_version, fetch_version):
    group = f"offsets-{next(_ids)}"
    assert commit(client, group, {0: 5, 1: 7}, commit_version) == {0: E.NONE, 1: E.NONE}
    resp = fetch(client, group, [0, 1, 2], fetch_version)  # partition 2 was never committed
    topics = resp.groups[0].topics if fetch_version >= 8 else resp.topics
    assert offsets_of(topics) == {0: (5, "m5", E.NONE), 1: (7, "m7", E.NONE), 2: (-1, "", E.NONE)}
    if fetch_version >= 2:
        every = fetch(client, group, None, fetch_version)  # null topics: everything committed
        topics = every.groups[0].topics if fetch_version >= 8 else every.topics
        assert {p: o for p, (o, _m, _e) in offsets_of(topics).items()} == {0: 5, 1: 7}


def test_commits_to_unknown_topics_or_partitions_are_refused(client):
    group = f"unknown-tp-{next(_ids)}"
    topic_type = m.OffsetCommitRequest.OffsetCommitRequestTopic
    partition_type = topic_type.OffsetCommitRequestPartition
    request = m.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        topic_type(name=TOPIC, partitions=[partition_type(partition_index=p, committed_offset=1) for p in (0, 3)]),
        topic_type(name="no-such-topic", partitions=[partition_type(partition_index=0, committed_offset=1)])])
    resp = client.request(request, 8)
    assert {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions} == {
        (TOPIC, 0): E.NONE, (TOPIC, 3): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert offsets_of(fetch(client, group, None, 7).topics) == {0: (1, "", E.NONE)}


def test_offset_fetch_v8_several_groups(client):
    a, b = f"multi-a-{next(_ids)}", f"multi-b-{next(_ids)}"
    commit(client, a, {0: 1}, 8)
    commit(client, b, {0: 2}, 8)
    group_type = m.OffsetFetchRequest.OffsetFetchRequestGroup
    resp = client.request(m.OffsetFetchRequest(groups=[group_type(group_id=a, topics=None),
                                                       group_type(group_id=b, topics=None)]), 8)
    assert {g.group_id: offsets_of(g.topics)[0][0] for g in resp.groups} == {a: 1, b: 2}


@pytest.mark.parametrize("version", [2, 8, 9])
def test_commit_with_a_generation_to_an_unknown_group(client, version):
    errors = commit(client, f"ghost-{next(_ids)}", {0: 1}, version, generation=3, member="m")
    expected = E.GROUP_ID_NOT_FOUND if version >= 9 else E.ILLEGAL_GENERATION
    assert errors == {0: expected}


def test_commits_from_a_member_are_fenced_by_generation(server, client):
    group = f"fenced-{next(_ids)}"
    member = Member(server.bootstrap, group, 5)
    try:
        member.join()
        assert member.join().error_code == E.NONE
        assert member.sync({member.member_id: assignment([0])}).error_code == E.NONE
        ok = commit(client, group, {0: 4}, 8, generation=member.generation_id, member=member.member_id)
        stale = commit(client, group, {0: 9}, 8, generation=member.generation_id - 1, member=member.member_id)
        stranger = commit(client, group, {0: 9}, 8, generation=member.generation_id, member="stranger")
        assert (ok, stale, stranger) == ({0: E.NONE}, {0: E.ILLEGAL_GENERATION}, {0: E.UNKNOWN_MEMBER_ID})
        assert offsets_of(fetch(client, group, [0], 7).topics)[0][0] == 4
    finally:
        member.close()


def test_describe_list_delete_and_offset_delete(server, client):
    group = f"admin-{next(_ids)}"
    member = Member(server.bootstrap, group, 5)
    try:
        member.join()
        member.join()
        member.sync({member.member_id: assignment([0, 1])})
        commit(client, group, {0: 3, 1: 4}, 8, generation=member.generation_id, member=member.member_id)

        described = client.request(m.DescribeGroupsRequest(groups=[group, "no-such-group"]), 5).groups
        assert [(g.group_id, g.group_state, g.error_code) for g in described] == [
            (group, "Stable", E.NONE), ("no-such-group", "Dead", E.NONE)]
        (only,) = described[0].members
        assert (only.member_id, only.client_id, only.member_assignment) == (
            member.member_id, "raw-dyn", assignment([0, 1]))
        v6 = client.request(m.DescribeGroupsRequest(groups=["no-such-group"]), 6).groups[0]
        assert v6.error_code == E.GROUP_ID_NOT_FOUND
        with_ops = client.request(m.DescribeGroupsRequest(groups=[group], include_authorized_operations=True), 5)
        assert with_ops.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)  # READ DELETE DESCRIBE
        assert described[0].authorized_operations == -(2**31)  # not asked for

        stable = client.request(m.ListGroupsRequest(states_filter=["stable"]), 4).groups
        empty = client.request(m.ListGroupsRequest(states_filter=["Empty"]), 4).groups
        assert group in {g.group_id for g in stable} and group not in {g.group_id for g in empty}
        classic = client.request(m.ListGroupsRequest(types_filter=["Classic"]), 5).groups
        assert {(g.group_id, g.group_type) for g in classic} >= {(group, "classic")}
        assert client.request(m.ListGroupsRequest(types_filter=["consumer"]), 5).groups == []  # no KIP-848 groups

        busy = client.request(m.DeleteGroupsRequest(groups_names=[group]), 2).results[0]
        assert busy.error_code == E.NON_EMPTY_GROUP
        subscribed = _offset_delete(client, group, [0])
        assert subscribed == (E.NONE, {0: E.GROUP_SUBSCRIBED_TO_TOPIC})

        assert member.leave(3).error_code == E.NONE  # the group is now Empty
        assert _offset_delete(client, group, [0]) == (E.NONE, {0: E.NONE})
        assert offsets_of(fetch(client, group, [0, 1], 5).topics) == {0: (-1, "", E.NONE), 1: (4, "m4", E.NONE)}
        deleted = client.request(m.DeleteGroupsRequest(groups_names=[group, "no-such-group"]), 1).results
        assert [(r.group_id, r.error_code) for r in deleted] == [
            (group, E.NONE), ("no-such-group", E.GROUP_ID_NOT_FOUND)]
        assert group not in {g.group_id for g in client.request(m.ListGroupsRequest(), 0).groups}
    finally:
        member.close()


def _offset_delete(client, group: str, partitions: list[int]):
    topic_type = m.OffsetDeleteRequest.OffsetDeleteRequestTopic
    resp = client.request(m.OffsetDeleteRequest(group_id=group, topics=[topic_type(name=TOPIC, partitions=[
        topic_type.OffsetDeleteRequestPartition(partition_index=p) for p in partitions])]), 0)
    return resp.error_code, {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}
