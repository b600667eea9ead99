"""ElectLeaders (key 43): move leadership to the preferred replica, or elect an out-of-sync one (KIP-460).

Versions (we serve 0-2, as Kafka 4.2):
  v0: preferred elections only
  v1: election_type (0 = PREFERRED, 1 = UNCLEAN); top-level error_code
  v2: flexible
Kafka's rules (ReplicationControlManager.electLeaders / electLeader): null topic_partitions = every
partition, answering only those whose election was needed; per partition ELECTION_NOT_NEEDED (the
preferred replica leads / someone leads), PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION. An unknown election type is INVALID_REQUEST for the whole request
(ElectLeadersRequest.getErrorResponse: top level and every partition named). ALTER on the cluster is
required (KafkaApis.handleElectLeaders: CLUSTER_AUTHORIZATION_FAILED).
Single node: this node is every partition's only replica and leader, so each election is not needed.
Cluster mode: the active controller elects (kcoord.cluster.controller.Controller.elect_leaders); any other
node answers NOT_CONTROLLER, and clients send ElectLeaders to the controller Metadata names.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import cluster_allowed
from kcoord.cluster.metadata_image import TopicPartition
from kcoord.cluster.partition_change import Election
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

ELECTION_TYPES = {0: Election.PREFERRED, 1: Election.UNCLEAN}


@api(key=43, name="ElectLeaders", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: m.ElectLeadersRequest):
    election = ELECTION_TYPES.get(request.election_type if ctx.api_version >= 1 else 0)
    if election is None:
        return _failed(request, ErrorCode.INVALID_REQUEST, f"Unknown election type {request.election_type}")
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return _failed(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    cluster = ctx.broker.cluster
    if cluster is None:
        every = [TopicPartition(t.name, p) for t in ctx.broker.topics.all() for p in range(t.partitions)]
        known = set(every)
        wanted = every if request.topic_partitions is None else _named(request)
        outcomes = {tp: (ErrorCode.ELECTION_NOT_NEEDED if tp in known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         None) for tp in wanted}
    else:
        controller = cluster.active_controller
        if controller is None:
            return _failed(request, ErrorCode.NOT_CONTROLLER, f"This node ({cluster.node_id}) is not the controller.")
        image = controller.image
        wanted = [tp for tp, _ in image.partitions()] if request.topic_partitions is None else _named(request)
        results = await controller.elect_leaders(wanted, election)
        outcomes = {tp: (o.error, o.message) for tp, o in results.items()}
    if request.topic_partitions is None:  # all partitions: only those whose election was needed
        outcomes = {tp: o for tp, o in outcomes.items() if o[0] is not ErrorCode.ELECTION_NOT_NEEDED}
    return _response(wanted, outcomes, ErrorCode.NONE)


def _named(request) -> list[TopicPartition]:
    return [TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions]


def _response(order: list[TopicPartition], outcomes, top: ErrorCode):
    R = m.ElectLeadersResponse
    by_topic: dict[str, list] = {}
    for tp in order:
        if tp in outcomes:
            error, message = outcomes[tp]
            by_topic.setdefault(tp.topic, []).append(
                R.PartitionResult(partition_id=tp.partition, error_code=error, error_message=message))
    return R(throttle_time_ms=0, error_code=top, replica_election_results=[
        R.ReplicaElectionResult(topic=topic, partition_result=parts) for topic, parts in by_topic.items()])


def _failed(request, error: ErrorCode, message: str | None):
    """ElectLeadersRequest.getErrorResponse: the error at the top and on every partition named."""
    named = [] if request.topic_partitions is None else _named(request)
    return _response(named, {tp: (error, message) for tp in named}, error)
