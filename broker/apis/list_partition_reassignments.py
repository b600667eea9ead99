"""ListPartitionReassignments (key 46): the partitions being reassigned, with their adding / removing replicas.

Versions (we serve 0, as Kafka 4.2):
  v0: flexible; topics null = every reassigning partition
As ReplicationControlManager.listPartitionReassignments: unknown topics and partitions, and partitions not
being reassigned, are left out (no per-partition error); DESCRIBE on the cluster is required, else
CLUSTER_AUTHORIZATION_FAILED at the top level (KafkaApis.handleListPartitionReassignmentsRequest).
Single node: nothing is ever reassigned, so the list is empty.
Cluster mode: the active controller answers from its image; elsewhere NOT_CONTROLLER at the top level.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import cluster_allowed
from kcoord.cluster.metadata_image import TopicPartition
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=46, name="ListPartitionReassignments", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.ListPartitionReassignmentsRequest):
    R = m.ListPartitionReassignmentsResponse
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, topics=[])
    cluster = ctx.broker.cluster
    if cluster is None:
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=[])
    controller = cluster.active_controller
    wanted = None if request.topics is None else [
        TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
    found = None if controller is None else controller.list_partition_reassignments(wanted)
    if found is None:
        return R(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                 error_message=f"This node ({cluster.node_id}) is not the controller.", topics=[])
    by_topic: dict[str, list] = {}
    for tp, reg in found:
        by_topic.setdefault(tp.topic, []).append(R.OngoingPartitionReassignment(
            partition_index=tp.partition, replicas=list(reg.replicas), adding_replicas=list(reg.adding_replicas),
            removing_replicas=list(reg.removing_replicas)))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             topics=[R.OngoingTopicReassignment(name=name, partitions=parts) for name, parts in by_topic.items()])
