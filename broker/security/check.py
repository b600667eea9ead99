"""What handlers ask of the authorizer for the request they serve (Kafka's AuthHelper): `allowed(ctx,
operation, resource_type, name)` is True when no authorizer is configured."""
from __future__ import annotations

from typing import Any

from kcoord.broker.security.acl import CLUSTER_NAME, ResourceType
from kcoord.broker.security.authorizer import all_operations
from kcoord.broker.security.principal import ANONYMOUS


def authorizer_of(ctx: Any) -> Any:
    security = getattr(ctx.broker, "security", None)
    return None if security is None else security.authorizer


def allowed(ctx: Any, operation: int, resource_type: int, name: str) -> bool:
    authz = authorizer_of(ctx)
    if authz is None:
        return True
    principal = ctx.session.principal if ctx.session is not None else ANONYMOUS
    return authz.authorize(principal, ctx.client_host, operation, resource_type, name)


def cluster_allowed(ctx: Any, operation: int) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_operations(ctx: Any, resource_type: int, name: str) -> int:
    authz = authorizer_of(ctx)
    if authz is None:
        return all_operations(resource_type)
    principal = ctx.session.principal if ctx.session is not None else ANONYMOUS
    return authz.authorized_operations(principal, ctx.client_host, resource_type, name)
