"""DescribeAcls (key 29): the ACL bindings a filter matches, grouped by resource pattern.

Versions (Kafka 4 serves 1-3):
  v1: pattern type filter (ANY / MATCH / LITERAL / PREFIXED)
  v2: flexible
  v3: same as v2
DESCRIBE on the cluster is required; without an authorizer: SECURITY_DISABLED; a filter with an UNKNOWN
field: INVALID_REQUEST. (AclApis.handleDescribeAcls)
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclBindingFilter, AclOperation
from kcoord.broker.security.check import authorizer_of, cluster_allowed
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


def acl_filter(f) -> AclBindingFilter:
    """A request's filter fields (DescribeAcls, DeleteAcls) as an AclBindingFilter."""
    return AclBindingFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                            f.principal_filter, f.host_filter, f.operation, f.permission_type)


def unknown_field(flt: AclBindingFilter) -> str | None:
    for name in ("resource_type", "pattern_type", "operation", "permission_type"):
        if getattr(flt, name) == 0:
            return f"Invalid {name.replace('_', ' ')} in the filter"
    return None


@api(key=29, name="DescribeAcls", min_version=1, max_version=3)
def handle(ctx: RequestContext, request: m.DescribeAclsRequest):
    R = m.DescribeAclsResponse
    authz = authorizer_of(ctx)
    if authz is None:
        return R(throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
                 error_message="No Authorizer is configured.", resources=[])
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                 resources=[])
    flt = acl_filter(request)
    invalid = unknown_field(flt)
    if invalid:
        return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=invalid, resources=[])
    grouped: dict[tuple, list] = {}
    for acl in authz.describe(flt):
        grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            R.AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation,
                             permission_type=acl.permission_type))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=[
        R.DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in grouped.items()])
