"""ListConfigResources (key 74, KIP-1142; ListClientMetricsResources at v0, KIP-714): the names of the
resources that have configs, for admin clients (`kafka-configs --describe --entity-type groups` lists groups
that have configs but no members through it).

Versions (we serve 0-1, as Kafka 4.2 does):
  v0: flexible from the start; the CLIENT_METRICS resources only, by name
  v1: resource_types filter (empty = every type served at this version: TOPIC 2, BROKER 4, BROKER_LOGGER 8,
      CLIENT_METRICS 16, GROUP 32 -- ListConfigResourcesRequest.supportedResourceTypes); resource_type per entry
A type outside that set refuses the request with UNSUPPORTED_VERSION. DESCRIBE_CONFIGS on the cluster is
required (CLUSTER_AUTHORIZATION_FAILED otherwise), as KafkaApis asks of ListClientMetricsResources.

What kcoord lists: every topic (internal ones too, as Kafka's metadata cache names them), this node's id for
BROKER and BROKER_LOGGER, the groups with config overrides (metadata/group_configs.py), and the CLIENT_METRICS
subscriptions (metadata/client_metrics_configs.py, KIP-714).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import cluster_allowed
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED_TYPES = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}


@api(key=74, name="ListConfigResources", min_version=0, max_version=1)
def handle(ctx: RequestContext, request: m.ListConfigResourcesRequest):
    R = m.ListConfigResourcesResponse
    if not cluster_allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, config_resources=[])
    supported = SUPPORTED_TYPES[ctx.api_version]
    wanted = (request.resource_types if ctx.api_version >= 1 else None) or supported
    if any(t not in supported for t in wanted):
        return R(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[])
    broker = ctx.broker
    names: list[tuple[int, str]] = []
    for resource_type in sorted(set(wanted)):
        if resource_type == TOPIC:
            names += [(TOPIC, t.name) for t in broker.topics.all()]
        elif resource_type in (BROKER, BROKER_LOGGER):
            names.append((resource_type, str(broker.node_id)))
        elif resource_type == GROUP:
            names += [(GROUP, g) for g in broker.group_configs.group_ids()]
        elif resource_type == CLIENT_METRICS:
            names += [(CLIENT_METRICS, n) for n in broker.client_metrics_configs.names()]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=[
        R.ConfigResource(resource_name=name, resource_type=resource_type) for resource_type, name in sorted(names)])
