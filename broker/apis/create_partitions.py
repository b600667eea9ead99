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
Cluster mode: the active controller adds the partitions (Controller.create_partitions: placed over the
registered brokers with the topic's replication factor, or checked when assigned by hand, as
ReplicationControlManager.createPartitions; its messages), the topic key and the new partition keys in
one txn; any other node answers NOT_CONTROLLER (clients send CreatePartitions to the controller).
controller_mutation_rate (KIP-599, broker/controller_mutation_quota.py) charges the partitions added once
the other checks pass, validate_only included (ReplicationControlManager.createPartitions; QuorumController
drops the records after); from v3 a topic above it gets THROTTLING_QUOTA_EXCEEDED, before v3 the quota only
throttles the response.
"""
from __future__ import annotations

from collections import Counter

from kcoord.broker.context import RequestContext
from kcoord.broker.controller_mutation_quota import THROTTLED_MESSAGE, quota_for_request, throttle_response
from kcoord.broker.registry import api
from kcoord.metadata.topics import TopicError
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=37, name="CreatePartitions", min_version=0, max_version=3)
async def handle(ctx: RequestContext, request: m.CreatePartitionsRequest):
    counts = Counter(t.name for t in request.topics)
    duplicates = [name for name, n in counts.items() if n > 1]
    results = [_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for name in duplicates]
    quota = quota_for_request(ctx, "CreatePartitions")
    cluster = ctx.broker.cluster
    if cluster is not None:
        controller = cluster.active_controller
        for t in request.topics:
            if counts[t.name] > 1:
                continue
            if controller is None:
                results.append(_result(t.name, ErrorCode.NOT_CONTROLLER,
                                       f"This node ({cluster.node_id}) is not the controller."))
                continue
            assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            # the controller checks as it writes: charge the growth it can see, give it back if refused
            topic = controller.image.topics.get(t.name)
            permits = t.count - len(topic.info.replicas) if topic is not None and topic.info is not None else 0
            if permits > 0 and not quota.try_record(permits):
                results.append(_result(t.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE))
                continue
            code, message = await controller.create_partitions(t.name, t.count, assignments,
                                                               validate_only=request.validate_only)
            if code != ErrorCode.NONE and permits > 0:
                quota.refund(permits)
            results.append(_result(t.name, code, message))
        return m.CreatePartitionsResponse(throttle_time_ms=throttle_response(ctx, quota), results=results)
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
        topic = topics.get(t.name)
        if topic is not None and not quota.try_record(t.count - topic.partitions):
            results.append(_result(t.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE))
            continue
        if not request.validate_only:
            topics.add_partitions(t.name, t.count)
        results.append(_result(t.name, ErrorCode.NONE, None))
    return m.CreatePartitionsResponse(throttle_time_ms=throttle_response(ctx, quota), results=results)


def _result(name: str, code: ErrorCode, message: str | None):
    return m.CreatePartitionsResponse.CreatePartitionsTopicResult(name=name, error_code=code, error_message=message)
