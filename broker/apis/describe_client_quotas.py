"""DescribeClientQuotas (key 48, KIP-546): the quota entities matching a filter, with their values
(metadata/client_quotas.py).

Versions (we serve 0-1, as Kafka 4.2 does):
  v0: components [entity_type, match_type (0 exact, 1 default, 2 any name), match], strict
  v1: flexible
A bad filter is a top-level error with Kafka's message (ClientQuotasImage.describe): INVALID_REQUEST, or
UNSUPPORTED_VERSION for an entity type other than user, client-id and ip. DESCRIBE_CONFIGS on the cluster
is required (KafkaApis.handleDescribeClientQuotasRequest: CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import cluster_allowed
from kcoord.metadata.client_quotas import QuotaRefused
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=48, name="DescribeClientQuotas", min_version=0, max_version=1)
def handle(ctx: RequestContext, request: m.DescribeClientQuotasRequest):
    R = m.DescribeClientQuotasResponse
    if not cluster_allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 error_message="Cluster authorization failed.", entries=None)
    try:
        found = ctx.broker.client_quotas.describe(
            [(c.entity_type, c.match_type, c.match) for c in request.components], request.strict)
    except QuotaRefused as exc:
        return R(throttle_time_ms=0, error_code=ErrorCode[exc.code_name], error_message=str(exc), entries=None)
    E = R.EntryData
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=[
        E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in sorted(entity, key=lambda p: p[0])],
          values=[E.ValueData(key=k, value=float(v)) for k, v in sorted(values.items())])
        for entity, values in found])
