"""FindCoordinator (api key 10): which node coordinates a group. On this single node: this node,
for every group (every `__consumer_offsets` partition is led here).

Versions:
  v0: Key (a group id)
  v1: KeyType (0 group, 1 transaction), ThrottleTimeMs, ErrorMessage
  v2: same as v1
  v3: flexible encoding (KIP-482)
  v4: batched CoordinatorKeys, one result per key (KIP-699)
  v5: TRANSACTION_ABORTABLE may be returned (KIP-890); nothing changes for groups
  v6: KeyType 2, share groups (KIP-932) — not served here: COORDINATOR_NOT_AVAILABLE
Key type 1 (transaction): this node, once the transaction coordinator runs (kcoord.txn.runtime); a partition
still loading is led here all the same (its requests answer COORDINATOR_LOAD_IN_PROGRESS).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2


def _lookup(ctx, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    """(error, message) for one key; NONE means this node coordinates it."""
    if key_type == GROUP_KEY:
        # A partition still loading is led here all the same: its group requests answer
        # COORDINATOR_LOAD_IN_PROGRESS, which clients retry against the same node.
        if not ctx.broker.group_coordinator.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        return ErrorCode.NONE, None
    if key_type == TRANSACTION_KEY:
        if not ctx.broker.txn_coordinator.coordinator.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        return ErrorCode.NONE, None
    if key_type == SHARE_KEY and ctx.api_version >= 6:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "This broker has no coordinator for that key type."
    return ErrorCode.INVALID_REQUEST, f"Unknown coordinator key type {key_type}."


@api(key=10, name="FindCoordinator", min_version=0, max_version=6)
async def handle(ctx: RequestContext, request: m.FindCoordinatorRequest):
    version = ctx.api_version
    key_type = request.key_type if version >= 1 else GROUP_KEY
    endpoint = ctx.broker.endpoint_for(ctx.listener)
    node_id, host, port = ctx.node_id, endpoint.host, endpoint.port
    if version < 4:
        error, message = _lookup(ctx, request.key, key_type)
        if error:
            return m.FindCoordinatorResponse(error_code=error, error_message=message,
                                             node_id=-1, host="", port=-1)
        return m.FindCoordinatorResponse(error_code=ErrorCode.NONE, error_message=None,
                                         node_id=node_id, host=host, port=port)
    coordinators = []
    for key in request.coordinator_keys:
        error, message = _lookup(ctx, key, key_type)
        found = error == ErrorCode.NONE
        coordinators.append(m.FindCoordinatorResponse.Coordinator(
            key=key, node_id=node_id if found else -1, host=host if found else "",
            port=port if found else -1, error_code=error, error_message=message))
    return m.FindCoordinatorResponse(coordinators=coordinators)
