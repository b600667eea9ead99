"""CreateAcls (key 30): add ACL bindings to the authorizer (stored durably).

Versions (Kafka 4 serves 1-3):
  v1: resource pattern type (LITERAL / PREFIXED, KIP-290)
  v2: flexible
  v3: same as v2
ALTER on the cluster is required (CLUSTER_AUTHORIZATION_FAILED); without an authorizer every creation
answers SECURITY_DISABLED; a binding that cannot be valid answers INVALID_REQUEST with Kafka's message
(AclControlManager.validateNewAcl), a host that is no CIDR block although it has a "/" included
(validateHostPattern, KIP-1276: kcoord.broker.security.acl_host). (KafkaApis / AclApis.handleCreateAcls)
Cluster mode: the bindings go to the metadata store and every node's authorizer follows them
(kcoord.broker.security.cluster_security); a store that does not answer fails them with REQUEST_TIMED_OUT.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclBinding, AclOperation, validate
from kcoord.broker.security.check import authorizer_of, cluster_allowed
from kcoord.metadata.store import StoreError
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured."


@api(key=30, name="CreateAcls", min_version=1, max_version=3)
async def handle(ctx: RequestContext, request: m.CreateAclsRequest):
    R = m.CreateAclsResponse
    authz = authorizer_of(ctx)

    def all_fail(code, message):
        return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=code, error_message=message)
                                              for _ in request.creations])

    if authz is None:
        return all_fail(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    results, valid = [], []
    for c in request.creations:
        binding = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                             c.operation, c.permission_type)
        reason = validate(binding)
        if reason is None:
            valid.append(binding)
        results.append(R.AclCreationResult(error_code=ErrorCode.INVALID_REQUEST if reason else ErrorCode.NONE,
                                            error_message=reason))
    cluster = ctx.broker.security.cluster
    if valid and cluster is not None:
        try:
            await cluster.create_acls(valid)
        except StoreError as exc:
            return all_fail(ErrorCode.REQUEST_TIMED_OUT, f"The cluster metadata store did not answer: {exc}")
    elif valid:
        authz.create(valid)
    return R(throttle_time_ms=0, results=results)
