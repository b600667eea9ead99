"""AlterPartitionReassignments (key 45): move a partition's replicas to a new list, or cancel (KIP-455).

Versions (we serve 0-1, as Kafka 4.2):
  v0: flexible; per partition the target replicas, or null to cancel an ongoing reassignment
  v1: allow_replication_factor_change (KIP-860): false refuses a target of another length with
      INVALID_REPLICATION_FACTOR; the response echoes it
Kafka's phases (ReplicationControlManager.alterPartitionReassignments, changePartitionReassignment,
cancelPartitionReassignment): the replica list becomes target + removing with adding / removing recorded;
the added replicas catch up and join the ISR; once every target replica is in the ISR the controller drops
the removed ones (and moves the leadership off them). Per partition: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICATION_ASSIGNMENT (empty, duplicate or unregistered brokers; a cancel that would need an
unclean election), NO_REASSIGNMENT_IN_PROGRESS (cancel with none), INVALID_REPLICATION_FACTOR (v1).
ALTER on the cluster is required, else CLUSTER_AUTHORIZATION_FAILED at the top level
(KafkaApis.handleAlterPartitionReassignmentsRequest).
Single node: the partition's one replica is this node, so the only valid target is [this node] (no
change); anything else is answered as a one-broker Kafka would.
Cluster mode: the active controller (Controller.alter_partition_reassignments); elsewhere NOT_CONTROLLER
at the top level, which clients retry on the controller Metadata names.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import cluster_allowed
from kcoord.cluster.metadata_image import TopicPartition
from kcoord.cluster.partition_change import Outcome, cancel_reassignment, start_reassignment
from kcoord.cluster.partition_state import PartitionRegistration
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=45, name="AlterPartitionReassignments", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: m.AlterPartitionReassignmentsRequest):
    allow_rf = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    R = m.AlterPartitionReassignmentsResponse
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return R(throttle_time_ms=0, allow_replication_factor_change=allow_rf,
                 error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, responses=[])
    targets = [(TopicPartition(t.name, p.partition_index), p.replicas) for t in request.topics for p in t.partitions]
    cluster = ctx.broker.cluster
    if cluster is None:
        outcomes = {tp: _single_node(ctx, tp, replicas, allow_rf) for tp, replicas in targets}
    else:
        controller = cluster.active_controller
        if controller is None:
            return R(throttle_time_ms=0, allow_replication_factor_change=allow_rf, error_code=ErrorCode.NOT_CONTROLLER,
                     error_message=f"This node ({cluster.node_id}) is not the controller.", responses=[])
        outcomes = await controller.alter_partition_reassignments(
            targets, allow_replication_factor_change=allow_rf)
    by_topic: dict[str, list] = {}
    for tp, _ in targets:
        outcome = outcomes[tp]
        by_topic.setdefault(tp.topic, []).append(R.ReassignablePartitionResponse(
            partition_index=tp.partition, error_code=outcome.error, error_message=outcome.message))
    return R(throttle_time_ms=0, allow_replication_factor_change=allow_rf, error_code=ErrorCode.NONE,
             error_message=None, responses=[R.ReassignableTopicResponse(name=name, partitions=parts)
                                            for name, parts in by_topic.items()])


def _single_node(ctx: RequestContext, tp: TopicPartition, replicas, allow_rf: bool) -> Outcome:
    """A one-broker Kafka's answer: the same checks on the partition's one-replica registration."""
    topic = ctx.broker.topics.get(tp.topic)
    if topic is None or not 0 <= tp.partition < topic.partitions:
        return Outcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message=f"Unable to find partition {tp.topic}:{tp.partition}.")
    node = ctx.broker.node_id
    current = PartitionRegistration(replicas=(node,), isr=(node,), leader=node)
    if replicas is None:
        return cancel_reassignment(current, {node})
    if not allow_rf and len(replicas) != 1:
        return Outcome(ErrorCode.INVALID_REPLICATION_FACTOR,
                       message=f"The replication factor is changed from 1 to {len(replicas)}")
    outcome = start_reassignment(current, replicas, {node}, {node})
    return Outcome(outcome.error, None, outcome.message)
