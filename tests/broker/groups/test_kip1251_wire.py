"""KIP-1251 (Kafka 4.3) over the wire: an OffsetCommit racing the heartbeat that bumped the member's epoch.

Kafka's ConsumerGroup.validateOffsetCommit (group-coordinator/.../modern/consumer/ConsumerGroup.java, 4.3:
createAssignmentEpochValidator) accepts a consumer-protocol member's commit whose epoch lies between a
partition's assignment epoch and the member's current epoch (assignmentEpoch <= clientEpoch <= memberEpoch),
per partition: a partition assigned only at the newer epoch answers STALE_MEMBER_EPOCH (113) alone, the
others are stored. Before 4.3 (and in kcoord until this) the epochs had to be equal."""
from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from tests.support.raw_kafka import RawKafka

GROUP = "kip1251-group"
HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH, METADATA = 68, 8, 9, 3


@pytest.fixture(scope="module")
def raw(kcoord_shared_server):
    from confluent_kafka.admin import AdminClient, NewTopic
    with AdminClient({"bootstrap.servers": kcoord_shared_server.bootstrap}) as admin:
        for f in admin.create_topics([NewTopic("kip1251-a", 2), NewTopic("kip1251-b", 2)]).values():
            f.result(30)
    with RawKafka(kcoord_shared_server.port) as r:
        yield r


def _heartbeat(raw, member_id: str, epoch: int, topics: list[str] | None, owned) -> m.ConsumerGroupHeartbeatResponse:
    R = m.ConsumerGroupHeartbeatRequest
    return raw.request(HEARTBEAT, 1, R(
        group_id=GROUP, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=60000, subscribed_topic_names=topics, subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=owned))


def _commit(raw, member_id: str, epoch: int, partitions: list[tuple[str, int]]) -> dict:
    Topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
    topics: dict[str, list[int]] = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    response = raw.request(OFFSET_COMMIT, 9, m.OffsetCommitRequest(
        group_id=GROUP, generation_id_or_member_epoch=epoch, member_id=member_id, group_instance_id=None,
        retention_time_ms=-1, topics=[Topic(name=t, partitions=[
            Topic.OffsetCommitRequestPartition(partition_index=p, committed_offset=42, committed_leader_epoch=-1,
                                               committed_metadata="") for p in ps]) for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_a_commit_racing_an_epoch_bump_is_accepted_for_what_the_member_held(raw):
    first = _heartbeat(raw, "m-1251", 0, ["kip1251-a"], [])
    assert first.error_code == E.NONE and first.member_epoch == 1, first
    owned = [m.ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
             for tp in first.assignment.topic_partitions]
    assert sum(len(tp.partitions) for tp in owned) == 2
    # the member subscribes to a second topic: the next heartbeat bumps it to epoch 2 with b's partitions
    second = _heartbeat(raw, "m-1251", 1, ["kip1251-a", "kip1251-b"], owned)
    assert second.error_code == E.NONE and second.member_epoch == 2, second
    # a commit the client sent before it saw epoch 2
    assert _commit(raw, "m-1251", 1, [("kip1251-a", 0), ("kip1251-a", 1), ("kip1251-b", 0)]) == {
        ("kip1251-a", 0): E.NONE, ("kip1251-a", 1): E.NONE, ("kip1251-b", 0): E.STALE_MEMBER_EPOCH}
    assert _commit(raw, "m-1251", 3, [("kip1251-a", 0)]) == {("kip1251-a", 0): E.STALE_MEMBER_EPOCH}
    fetched = raw.request(OFFSET_FETCH, 7, m.OffsetFetchRequest(group_id=GROUP, require_stable=False, topics=[
        m.OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=[0]) for t in ("kip1251-a", "kip1251-b")]))
    assert {(t.name, p.committed_offset) for t in fetched.topics for p in t.partitions} == {
        ("kip1251-a", 42), ("kip1251-b", -1)}
    _heartbeat(raw, "m-1251", -1, None, None)  # leave
