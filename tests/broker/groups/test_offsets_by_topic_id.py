"""OffsetCommit v10 and OffsetFetch v10 over the wire: topics named by id only (KIP-848's follow-up,
KAFKA-14690 / KAFKA-14691).

Kafka's request handler (core/src/main/scala/kafka/server/KafkaApis.scala) resolves each topic id
through its metadata cache before the group coordinator sees the request:
- handleOffsetCommitRequest: a topic whose id does not resolve answers UNKNOWN_TOPIC_ID on every
  partition; the others are committed and answered by id;
- fetchOffsetsForGroup: an unresolved id answers UNKNOWN_TOPIC_ID (offset -1) on every requested
  partition, after the coordinator's topics, and only when the group itself has no error;
- fetchAllOffsetsForGroup: each topic gets its id from the metadata cache; a topic without one (it
  was deleted) is skipped, as it cannot be written without an id.
"""
from __future__ import annotations

import itertools
import uuid

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E

_ids = itertools.count()
CommitTopic = m.OffsetCommitRequest.OffsetCommitRequestTopic
FetchGroup = m.OffsetFetchRequest.OffsetFetchRequestGroup


@pytest.fixture
def client(server):
    with KafkaWireClient.connect(server.bootstrap) as c:
        yield c


def topic_id(client, name: str) -> uuid.UUID:
    resp = client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=name)],
                                            allow_auto_topic_creation=False), 12)
    (topic,) = resp.topics
    assert topic.error_code == E.NONE
    return topic.topic_id


def commit(client, group: str, offsets: dict[uuid.UUID, dict[int, int]]):
    return client.request(m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            CommitTopic(topic_id=tid, partitions=[CommitTopic.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=o, committed_metadata="") for p, o in parts.items()])
            for tid, parts in offsets.items()]), 10)


def fetch(client, group: str, topics: dict[uuid.UUID, list[int]] | None):
    wanted = None if topics is None else [FetchGroup.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=ps)
                                          for tid, ps in topics.items()]
    resp = client.request(m.OffsetFetchRequest(groups=[FetchGroup(group_id=group, topics=wanted)]), 10)
    (answer,) = resp.groups
    return answer


def answers(topics) -> dict[uuid.UUID, dict[int, tuple]]:
    return {t.topic_id: {p.partition_index: (p.committed_offset, p.error_code) for p in t.partitions}
            for t in topics}


def test_commit_and_fetch_by_topic_id(server, client):
    name, group = f"by-id-{next(_ids)}", f"by-id-group-{next(_ids)}"
    server.create_topic(name, 2)
    tid = topic_id(client, name)
    resp = commit(client, group, {tid: {0: 5, 1: 7}})
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        (tid, [(0, E.NONE), (1, E.NONE)])]
    assert answers(fetch(client, group, {tid: [0, 1]}).topics) == {tid: {0: (5, E.NONE), 1: (7, E.NONE)}}
    # the same offsets by name, at v9: v10 committed them under the topic the id names
    assert server.committed_offsets(group, name, 2) == {0: 5, 1: 7}


def test_unknown_topic_id_answers_unknown_topic_id(server, client):
    name, group = f"by-id-{next(_ids)}", f"by-id-group-{next(_ids)}"
    server.create_topic(name, 1)
    tid, stranger = topic_id(client, name), uuid.uuid4()
    resp = commit(client, group, {stranger: {0: 1, 3: 2}, tid: {0: 9, 4: 9}})
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        (stranger, [(0, E.UNKNOWN_TOPIC_ID), (3, E.UNKNOWN_TOPIC_ID)]),
        (tid, [(0, E.NONE), (4, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    got = fetch(client, group, {stranger: [0], tid: [0]})
    assert got.error_code == E.NONE
    # the coordinator's topics first, then the ids it never saw
    assert [t.topic_id for t in got.topics] == [tid, stranger]
    assert answers(got.topics) == {tid: {0: (9, E.NONE)}, stranger: {0: (-1, E.UNKNOWN_TOPIC_ID)}}


def test_fetch_all_leaves_out_deleted_topics(server, client):
    kept, gone, group = f"by-id-{next(_ids)}", f"by-id-{next(_ids)}", f"by-id-group-{next(_ids)}"
    server.create_topic(kept, 1)
    server.create_topic(gone, 1)
    kept_id, gone_id = topic_id(client, kept), topic_id(client, gone)
    assert {p.error_code for t in commit(client, group, {kept_id: {0: 3}, gone_id: {0: 4}}).topics
            for p in t.partitions} == {E.NONE}
    assert answers(fetch(client, group, None).topics) == {kept_id: {0: (3, E.NONE)}, gone_id: {0: (4, E.NONE)}}
    resp = client.request(m.DeleteTopicsRequest(topic_names=[gone], timeout_ms=5000), 5)
    assert [r.error_code for r in resp.responses] == [E.NONE]
    assert answers(fetch(client, group, None).topics) == {kept_id: {0: (3, E.NONE)}}
