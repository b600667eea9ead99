"""CreatePartitions (key 37): grow a topic's partition count (new partitions get logs at once).

Versions (we serve 0-3):
  v0: topics with a new count and optional manual assignments, timeout, validate_only
  v1: same as v0 (throttling after the response, KIP-219)
  v2: flexible
  v3: same as v2
Errors as Kafka's ControllerApis / ReplicationControlManager.createPartitions: a topic named twice ->
INVALID_REQUEST "Duplicate topic name." (answered first, once per name); unknown topic ->
UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one -> INVALID_PARTITIONS; assignments of
the wrong length, with more than one replica or naming another broker -> INVALID_REPLICATION_ASSIGNMENT.
validate_only runs every check and changes nothing. Clients see the new partitions in their next
Metadata; a consumer group's leader then rejoins (classic protocol), and the assignment covers them.
Cluster mode: not served yet (the controller has no create-partitions operation): every topic is
answered NOT_CONTROLLER on a node that is not the controller, and on the controller INVALID_REQUEST
saying so.
"""
from __future__ import annotations

from collections import Counter

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.metadata.topics import TopicError
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=37, name="CreatePartitions", min_version=0, max_version=3)
async def handle(ctx: RequestContext, request: m.CreatePartitionsRequest):
    counts = Counter(t.name for t in request.topics)
    duplicates = [name for name, n in counts.items() if n > 1]
    results = [_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for name in duplicates]
    cluster = ctx.broker.cluster
    if cluster is not None:
        code, message = ((ErrorCode.INVALID_REQUEST, "CreatePartitions is not supported in cluster mode yet.")
                         if cluster.is_controller else (ErrorCode.NOT_CONTROLLER, None))
        results += [_result(name, code, message) for name in counts if counts[name] == 1]
        return m.CreatePartitionsResponse(throttle_time_ms=0, results=results)
    topics = ctx.broker.topics
    for t in request.topics:
        if counts[t.name] > 1:
            continue
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        try:
            topics.check_add_partitions(t.name, t.count, assignments)
        except TopicError as exc:
            results.append(_result(t.name, exc.code, exc.message))
            continue
        if not request.validate_only:
            topics.add_partitions(t.name, t.count)
        results.append(_result(t.name, ErrorCode.NONE, None))
    return m.CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _result(name: str, code: ErrorCode, message: str | None):
    return m.CreatePartitionsResponse.CreatePartitionsTopicResult(name=name, error_code=code, error_message=message)
