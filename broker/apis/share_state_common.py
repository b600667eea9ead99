"""What the five share-state RPCs (keys 83-87) share: the node's share coordinator, or why there is none.

These are broker-to-broker APIs (their definitions' listeners are ["broker"]), sent by a share-partition's
leader to the share coordinator of its key (Kafka's PersisterStateManager); a broker advertises them on its
listeners as Kafka's ApiVersionManager does for every broker-listener API. In a cluster the share
coordinator is kcoord.broker.share.coordinator_service.ShareCoordinatorService; a single node is the
share coordinator of every key and answers them on its own share-partitions (kcoord.broker.share.local_state).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.share.coordinator_service import ShareCoordinatorService
from kcoord.broker.share.local_state import LocalShareState
from kcoord.protocol.errors import ErrorCode


def share_coordinator(ctx: RequestContext) -> ShareCoordinatorService | LocalShareState:
    service = ctx.broker.share_coordinator
    return service if service is not None else LocalShareState(ctx.broker.share_partitions)


def request_error(ctx: RequestContext, group_id: str) -> tuple[ErrorCode, str | None] | None:
    """The error of every partition of the request, or None to answer each (ShareCoordinatorShard's
    checks: an empty group id is INVALID_REQUEST)."""
    if not group_id:
        return ErrorCode.INVALID_REQUEST, "Group id must be specified and non-empty."
    return None


def partition_error(partition: int) -> tuple[ErrorCode, str | None] | None:
    if partition < 0:
        return ErrorCode.INVALID_REQUEST, "Partition id must be non-negative."
    return None
