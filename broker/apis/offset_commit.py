"""OffsetCommit (api key 8): store a group's consumed positions; answered once they are durable.

Versions (v0-v1 were removed in Kafka 4.0, KIP-896):
  v2: GenerationId and MemberId checked; RetentionTimeMs (an explicit expiry, OffsetCommitValue v1)
  v3: ThrottleTimeMs in the response
  v4: same as v3
  v5: RetentionTimeMs removed: the broker's offsets.retention.minutes applies (KIP-211)
  v6: CommittedLeaderEpoch per partition (KIP-320)
  v7: GroupInstanceId (KIP-345)
  v8: flexible encoding (KIP-482)
  v9: an unknown group answers GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION (KIP-848)
  v10: topics named by TopicId only (Name is not on the wire); an id the broker does not know answers
       UNKNOWN_TOPIC_ID for each of its partitions (KafkaApis.handleOffsetCommitRequest, KAFKA-14690)
Partitions of topics (or partitions) that do not exist answer UNKNOWN_TOPIC_OR_PARTITION and are not
stored, as Kafka's request handler does before the coordinator sees the commit.

Every consumer commits all the time, so besides the handler it has a frame handler: the same
answer, read from and written to whole frames by code generated from the same message definitions
(protocol/frames.py: partitions as columns), for the versions registered here, and handed back as a
future the server waits on (no task per commit). Both ask the coordinator the same way; the server
uses the frame handler unless hooks are set or the frame is unusual.
"""
from __future__ import annotations

import functools
import time
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING

from kcoord.broker.context import RequestContext
from kcoord.broker.frame_answer import FrameAnswer
from kcoord.broker.registry import api, frame_handler, version_range
from kcoord.coordinator.results import OffsetCommit, OffsetCommitRequestPartition
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the composition root (it imports the server: a run-time import would be a cycle)
    from kcoord.broker.app import Broker

API_KEY = 8

NO_RETENTION = -1
_Topic = m.OffsetCommitResponse.OffsetCommitResponseTopic
_Partition = _Topic.OffsetCommitResponsePartition
_new_tuple = tuple.__new__  # an OffsetCommitRequestPartition without NamedTuple's Python-level __new__
_request_partition = functools.partial(_new_tuple, OffsetCommitRequestPartition)
_index, _offset, _epoch, _metadata = (attrgetter(f) for f in (
    "partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata"))
# The usual answer to a partition, NONE, as one shared object per partition index: encoding only reads
# it, and a commit answers the same partitions again and again (bounded: indices come from clients).
_ACCEPTED: dict[int, _Partition] = {}
_ACCEPTED_MAX = 1 << 14


def _accepted(index: int):
    answer = _Partition(partition_index=index, error_code=ErrorCode.NONE)
    if len(_ACCEPTED) < _ACCEPTED_MAX:
        _ACCEPTED[index] = answer
    return answer


def _response(request, errors: dict[tuple[str, int], ErrorCode] | ErrorCode) -> m.OffsetCommitResponse:
    """Every partition of the request answered: from `errors` by (topic, partition), or all with one code."""
    if isinstance(errors, dict):
        if not any(errors.values()):
            errors = ErrorCode.NONE  # the usual answer: every partition stored
        elif len(set(errors.values())) == 1:
            errors = next(iter(errors.values()))
    out = []
    accepted = _ACCEPTED.get
    for t in request.topics:
        name = t.name
        if isinstance(errors, dict):
            parts = [_Partition(partition_index=p.partition_index, error_code=errors[(name, p.partition_index)])
                     for p in t.partitions]
        elif errors == ErrorCode.NONE:
            parts = list(map(accepted, map(_index, t.partitions)))
            if not all(parts):  # an index answered for the first time
                parts = [p or _accepted(i) for p, i in zip(parts, map(_index, t.partitions), strict=True)]
        else:
            parts = [_Partition(partition_index=p.partition_index, error_code=errors) for p in t.partitions]
        out.append(_Topic(name=name, topic_id=t.topic_id, partitions=parts))
    return m.OffsetCommitResponse(topics=out)


def _existing(known_topics, topics) -> tuple[list[OffsetCommitRequestPartition], dict[tuple[str, int], ErrorCode]]:
    """The partitions to store, from `topics` as columns (name, indices, offsets, epochs, metadata), and
    UNKNOWN_TOPIC_OR_PARTITION for those that do not exist. Existence is checked per topic, not per
    partition: a commit names few topics, many partitions."""
    offsets: list[OffsetCommitRequestPartition] = []
    errors: dict[tuple[str, int], ErrorCode] = {}
    for name, indices, committed, epochs, metadata in topics:
        known = known_topics.get(name)
        count = known.partitions if known is not None else 0
        if not indices or (min(indices) >= 0 and max(indices) < count):
            # Every partition exists (the usual commit): its entries are made in C, no step per partition.
            offsets += map(_request_partition, zip(repeat(name), indices, committed, epochs, metadata, strict=False))
            continue
        for index, offset, epoch, text in zip(indices, committed, epochs, metadata, strict=False):
            if 0 <= index < count:
                offsets.append(_new_tuple(OffsetCommitRequestPartition, (name, index, offset, epoch, text)))
            else:
                errors[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return offsets, errors


def resolve_topic_ids(known_topics, topics) -> dict[tuple[str, int], ErrorCode]:
    """v10: name each topic after its id, as Kafka's request handler does; a topic whose id is unknown
    keeps the empty name and answers UNKNOWN_TOPIC_ID for every partition (no topic is named "")."""
    errors: dict[tuple[str, int], ErrorCode] = {}
    for t in topics:
        topic = known_topics.by_id(t.topic_id)
        t.name = topic.name if topic is not None else ""
        if topic is None:
            errors.update((("", p.partition_index), ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partitions)
    return errors


@api(key=API_KEY, name="OffsetCommit", min_version=2, max_version=10)
async def handle(ctx: RequestContext, request: m.OffsetCommitRequest):
    version = ctx.api_version
    epochs = version >= 6
    unknown_ids = resolve_topic_ids(ctx.broker.topics, request.topics) if version >= 10 else {}
    offsets, errors = _existing(ctx.broker.topics, (
        (t.name, list(map(_index, t.partitions)), map(_offset, t.partitions),
         map(_epoch, t.partitions) if epochs else repeat(-1), map(_metadata, t.partitions))
        for t in request.topics if t.name or version < 10))
    errors.update(unknown_ids)
    if offsets or not errors:
        started = time.monotonic()
        reply = ctx.broker.group_coordinator.commit_offsets(OffsetCommit(
            request.group_id, request.member_id, request.group_instance_id if version >= 7 else None,
            request.generation_id_or_member_epoch, offsets,
            request.retention_time_ms if version <= 4 else NO_RETENTION, version))
        # Handed over, not held while the write waits for its fsync (young GC collections walk what
        # requests in flight hold).
        del offsets
        stored = await reply
        ctx.broker.metrics.commit_latency(time.monotonic() - started)  # request to durable answer
        if not errors:
            return _response(request, stored)  # every partition was stored or refused by the coordinator
        errors.update(stored)
    return _response(request, errors)


reader = frames.RequestReader("OffsetCommit", *version_range(API_KEY))
writer = frames.ResponseWriter("OffsetCommit", *version_range(API_KEY))


@frame_handler(key=API_KEY)
def serve_frame(broker: Broker, frame: bytes, _client_host: str):
    """`handle`, from and to whole frames: (0, response frame) at once, a future of it when the commit
    waits for its write, or None for a frame the reader does not take."""
    request = reader.read(frame)
    if request is None:
        return None
    correlation_id, version, (group_id, generation_id, member_id, group_instance_id, retention_time_ms,
                              topics) = request
    unknown_ids = {}
    if version >= 10:
        topics, unknown_ids = _named_by_id(broker.topics, topics)
    # a topic is (name, topic id, (indices, offsets, epochs, metadata)) and _existing takes one tuple
    offsets, errors = _existing(broker.topics, ((name, *columns) for name, _id, columns in topics
                                                if name or version < 10))
    errors.update(unknown_ids)
    if not offsets and errors:
        return 0, response_frame(version, correlation_id, topics, errors)
    commit = _Commit(broker.metrics, version, correlation_id, topics, errors)
    # The front door `handle` reaches too, with the same request, and a callback that answers the frame.
    broker.group_coordinator.commit_offsets(OffsetCommit(
        group_id, member_id, group_instance_id if version >= 7 else None, generation_id, offsets,
        retention_time_ms if version <= 4 else NO_RETENTION, version), commit)
    return commit.answer()


def _named_by_id(known_topics, topics):
    """resolve_topic_ids for the reader's topic tuples: (topics with their names, UNKNOWN_TOPIC_ID errors)."""
    named, errors = [], {}
    for _name, topic_id, columns in topics:
        topic = known_topics.by_id(topic_id)
        if topic is None:
            errors.update((("", index), ErrorCode.UNKNOWN_TOPIC_ID) for index in columns[0])
        named.append((topic.name if topic is not None else "", topic_id, columns))
    return named, errors


# The answer to a commit that every partition accepted is the same body for the same topics and
# partitions, whatever the offsets: remembered by (version, error code, topics, partition indices).
# Bounded: emptied when full.
MAX_REMEMBERED = 1 << 12
_remembered: dict[tuple, bytes] = {}


def response_frame(version: int, correlation_id: int, topics, errors: int | dict[tuple[str, int], int]) -> bytes:
    """The whole OffsetCommitResponse frame, throttle_time_ms 0, answering every partition of `topics`
    (the reader's, names resolved), in order: with one error code for all, or by (topic name,
    partition index) from `errors`."""
    if isinstance(errors, dict):
        codes = set(errors.values())
        if len(codes) <= 1:  # what the general handler does too: then one code answers all
            errors = codes.pop() if codes else 0
    if isinstance(errors, dict):
        body = writer.body(version, 0, [(name, topic_id, (columns[0], [errors[(name, i)] for i in columns[0]]))
                                        for name, topic_id, columns in topics])
    else:
        # a topic by its name (hashing a UUID costs a Python call), by its id where no topic has it
        key = (version, errors, *[(name or topic_id, columns[0]) for name, topic_id, columns in topics])
        body = _remembered.get(key)
        if body is None:
            body = writer.body(version, 0, [(name, topic_id, (columns[0], (errors,) * len(columns[0])))
                                            for name, topic_id, columns in topics])
            if len(_remembered) >= MAX_REMEMBERED:
                _remembered.clear()
            _remembered[key] = body
    return writer.wrap(version, correlation_id, body)


class _Commit(FrameAnswer):
    """A commit's response frame, once the coordinator answers: at once for a refused commit, else once
    it is durable."""

    __slots__ = ("_metrics", "_version", "_correlation_id", "_topics", "_errors", "_started")

    def __init__(self, metrics, version: int, correlation_id: int, topics, errors) -> None:
        super().__init__()
        self._metrics = metrics
        self._version = version
        self._correlation_id = correlation_id
        self._topics = topics
        self._errors = errors
        self._started = time.monotonic()

    def _frame(self, stored) -> tuple[int, bytes]:
        self._metrics.commit_latency(time.monotonic() - self._started)  # request to durable answer
        errors = self._errors
        if errors:
            errors.update(stored)
        else:
            errors = stored
        # error code 0: the general path's metric reads the response's top-level error_code, which
        # OffsetCommitResponse has not
        return 0, response_frame(self._version, self._correlation_id, self._topics, errors)
