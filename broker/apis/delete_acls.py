"""DeleteAcls (key 31): remove the ACL bindings each filter matches, and say which.

Versions (Kafka 4 serves 1-3):
  v1: pattern type filter
  v2: flexible
  v3: same as v2
ALTER on the cluster is required; without an authorizer: SECURITY_DISABLED per filter.
(AclApis.handleDeleteAcls) Cluster mode: the matched bindings are deleted from the metadata store
(kcoord.broker.security.cluster_security).
"""
from __future__ import annotations

from kcoord.broker.apis.describe_acls import acl_filter, unknown_field
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import authorizer_of, cluster_allowed
from kcoord.metadata.store import StoreError
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=31, name="DeleteAcls", min_version=1, max_version=3)
async def handle(ctx: RequestContext, request: m.DeleteAclsRequest):
    R = m.DeleteAclsResponse
    authz = authorizer_of(ctx)

    def all_fail(code, message):
        return R(throttle_time_ms=0, filter_results=[R.DeleteAclsFilterResult(
            error_code=code, error_message=message, matching_acls=[]) for _ in request.filters])

    if authz is None:
        return all_fail(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    filters = [acl_filter(f) for f in request.filters]
    valid = [f for f in filters if unknown_field(f) is None]
    cluster = ctx.broker.security.cluster
    if cluster is None:
        removed = dict(zip(map(id, valid), authz.delete(valid), strict=True))
    else:
        removed = dict(zip(map(id, valid), authz.matching(valid), strict=True))
        try:
            await cluster.delete_acls([acl for matched in removed.values() for acl in matched])
        except StoreError as exc:
            return all_fail(ErrorCode.REQUEST_TIMED_OUT, f"The cluster metadata store did not answer: {exc}")
    results = []
    for flt in filters:
        invalid = unknown_field(flt)
        if invalid:
            results.append(R.DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=invalid,
                                                    matching_acls=[]))
            continue
        results.append(R.DeleteAclsFilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            R.DeleteAclsMatchingAcl(error_code=ErrorCode.NONE, error_message=None, resource_type=a.resource_type,
                                    resource_name=a.resource_name, pattern_type=a.pattern_type,
                                    principal=a.principal, host=a.host, operation=a.operation,
                                    permission_type=a.permission_type)
            for a in removed[id(flt)]]))
    return R(throttle_time_ms=0, filter_results=results)
