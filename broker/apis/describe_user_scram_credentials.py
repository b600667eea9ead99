"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iterations) each user has.

Versions:
  v0: flexible; users null or empty = every user (KIP-554)
DESCRIBE on the cluster is required (CLUSTER_AUTHORIZATION_FAILED). A user asked for twice answers
DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND (Kafka's messages).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import cluster_allowed
from kcoord.metadata.scram_store import TYPE_OF
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=50, name="DescribeUserScramCredentials", min_version=0, max_version=0)
def handle(ctx: RequestContext, request: m.DescribeUserScramCredentialsRequest):
    R = m.DescribeUserScramCredentialsResponse
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                 results=[])
    known = ctx.broker.security.scram.users()
    names = [u.name for u in request.users] if request.users else sorted(known)
    results = []
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            results.append(R.DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE, credential_infos=[],
                error_message=f"Cannot describe SCRAM credentials for the same user twice in a single "
                              f"request: {name}"))
        elif name not in known:
            results.append(R.DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND, credential_infos=[],
                error_message=f"Attempt to describe a user credential that does not exist: {name}"))
        else:
            results.append(R.DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.NONE, error_message=None, credential_infos=[
                    R.CredentialInfo(mechanism=TYPE_OF[mech], iterations=iterations)
                    for mech, iterations in sorted(known[name].items())]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
