"""What handlers ask of the authorizer for the request they serve (Kafka's AuthHelper): `allowed(ctx,
operation, resource_type, name)` is True when no authorizer is configured."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kcoord.broker.security.acl import CLUSTER_NAME, ResourceType
from kcoord.broker.security.authorizer import all_operations

if TYPE_CHECKING:
    from kcoord.broker.context import RequestContext
    from kcoord.broker.security.authorizer import StandardAuthorizer


def authorizer_of(ctx: RequestContext) -> StandardAuthorizer | None:
    return ctx.broker.security.authorizer


def allowed(ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
    authz = authorizer_of(ctx)
    if authz is None:
        return True
    principal = ctx.session.principal
    return authz.authorize(principal, ctx.client_host, operation, resource_type, name)


def cluster_allowed(ctx: RequestContext, operation: int) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_operations(ctx: RequestContext, resource_type: int, name: str) -> int:
    authz = authorizer_of(ctx)
    if authz is None:
        return all_operations(resource_type)
    principal = ctx.session.principal
    return authz.authorized_operations(principal, ctx.client_host, resource_type, name)
