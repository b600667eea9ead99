"""OffsetFetch (api key 9): a group's committed positions (offset -1 where none is committed).

Versions (v0, offsets in ZooKeeper, was removed in Kafka 4.0, KIP-896):
  v1: offsets from __consumer_offsets
  v2: null Topics means every partition the group has committed; top-level ErrorCode (KIP-88)
  v3: ThrottleTimeMs in the response
  v4: same as v3
  v5: CommittedLeaderEpoch per partition (KIP-320)
  v6: flexible encoding (KIP-482)
  v7: RequireStable: UNSTABLE_OFFSET_COMMIT while a transactional commit is pending (KIP-447)
  v8: several groups per request, one result per group (KIP-709)
  v9: MemberId / MemberEpoch for KIP-848 groups: a consumer group answers UNKNOWN_MEMBER_ID or
      STALE_MEMBER_EPOCH unless they name a member in its current epoch (or are null/-1: admin tools);
      not checked for classic groups
  v10: topics named by TopicId only (KafkaApis.fetchOffsetsForGroup / fetchAllOffsetsForGroup,
       KAFKA-14691): a requested id the broker does not know answers UNKNOWN_TOPIC_ID on each of its
       partitions (offset -1), after the known topics and only when the group has no error; when every
       topic is fetched, a topic that no longer exists (no id to name it by) is left out
v2-v7 answer a group-level error with that error alone and no partitions, as Kafka does.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.coordinator.results import OffsetFetchResult
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


def _fetch(groups, group_id: str, topics, require_stable: bool, member_id: str | None = None,
           member_epoch: int = -1) -> OffsetFetchResult:
    """OffsetFetchResult for one group; `topics` None means all."""
    partitions = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    if member_id is None and member_epoch < 0:
        return groups.fetch_offsets(group_id, partitions, require_stable)
    return groups.fetch_offsets(group_id, partitions, require_stable, member_id, member_epoch)


def _topics(topic_type, partition_type, partitions, topic_ids=None) -> list:
    """Response topics (of the version's struct types) for OffsetFetchPartition results; `topic_ids`
    (v10) maps each name to its id, and a topic without one is left out."""
    by_topic: dict[str, list] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
    out = []
    for name, parts in by_topic.items():
        topic = topic_type(name=name, partitions=[
            partition_type(partition_index=p.partition, committed_offset=p.offset,
                           committed_leader_epoch=p.leader_epoch, metadata=p.metadata, error_code=p.error)
            for p in parts])
        if topic_ids is not None:
            topic.topic_id = topic_ids(name)
            if topic.topic_id is None:
                continue
        out.append(topic)
    return out


def _group_v10(broker, g, require_stable: bool, group_type):
    """One group's answer at v10: ids resolved to names before the coordinator is asked."""
    topic_type = group_type.OffsetFetchResponseTopics
    partition_type = topic_type.OffsetFetchResponsePartitions
    known, unknown, ids = None, [], {}
    if g.topics is not None:
        known = []
        for t in g.topics:
            topic = broker.topics.by_id(t.topic_id)
            if topic is None:
                unknown.append(topic_type(topic_id=t.topic_id, partitions=[
                    partition_type(partition_index=p, committed_offset=-1, metadata="",
                                   error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partition_indexes]))
            else:
                t.name = topic.name
                ids[topic.name] = t.topic_id
                known.append(t)
        topic_ids = ids.get
    else:
        def topic_ids(name):
            topic = broker.topics.get(name)
            return topic.topic_id if topic is not None else None
    result = _fetch(broker.group_coordinator, g.group_id, known, require_stable, g.member_id, g.member_epoch)
    topics = _topics(topic_type, partition_type, result.partitions, topic_ids)
    if not result.error:  # a group-level error answers alone (Kafka adds the id errors only to a success)
        topics += unknown
    return group_type(group_id=g.group_id, error_code=result.error, topics=topics)


@api(key=9, name="OffsetFetch", min_version=1, max_version=10)
def handle(ctx: RequestContext, request: m.OffsetFetchRequest):
    version = ctx.api_version
    groups = ctx.broker.group_coordinator
    require_stable = request.require_stable if version >= 7 else False
    if version >= 8:
        group_type = m.OffsetFetchResponse.OffsetFetchResponseGroup
        topic_type = group_type.OffsetFetchResponseTopics
        partition_type = topic_type.OffsetFetchResponsePartitions
        if version >= 10:
            return m.OffsetFetchResponse(groups=[
                _group_v10(ctx.broker, g, require_stable, group_type) for g in request.groups])
        out = []
        for g in request.groups:
            member = (g.member_id, g.member_epoch) if version >= 9 else (None, -1)
            result = _fetch(groups, g.group_id, g.topics, require_stable, *member)
            out.append(group_type(group_id=g.group_id, error_code=result.error,
                                  topics=_topics(topic_type, partition_type, result.partitions)))
        return m.OffsetFetchResponse(groups=out)

    topics = request.topics if version >= 2 else list(request.topics or ())
    result = _fetch(groups, request.group_id, topics, require_stable)
    topic_type = m.OffsetFetchResponse.OffsetFetchResponseTopic
    partition_type = topic_type.OffsetFetchResponsePartition
    if result.error and version >= 2:
        return m.OffsetFetchResponse(error_code=result.error, topics=[])
    if result.error:  # v1 has no top-level error: every requested partition carries it
        return m.OffsetFetchResponse(topics=[
            topic_type(name=t.name, partitions=[
                partition_type(partition_index=p, committed_offset=-1, metadata="", error_code=result.error)
                for p in t.partition_indexes])
            for t in topics])
    return m.OffsetFetchResponse(error_code=0, topics=_topics(topic_type, partition_type, result.partitions))
