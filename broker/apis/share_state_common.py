"""What the five share-state RPCs (keys 83-87) share: the node's share coordinator, or why there is none,
and the walk over the request's topics and partitions that each handler fills in with its one call.

These are broker-to-broker APIs (their definitions' listeners are ["broker"]), sent by a share-partition's
leader to the share coordinator of its key (Kafka's PersisterStateManager); a broker advertises them on its
listeners as Kafka's ApiVersionManager does for every broker-listener API. In a cluster the share
coordinator is kcoord.broker.share.coordinator_service.ShareCoordinatorService; a single node is the
share coordinator of every key and answers them on its own share-partitions (kcoord.broker.share.local_state).
"""
from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kcoord.broker.context import RequestContext
from kcoord.broker.share.coordinator import ShareKey
from kcoord.broker.share.coordinator_service import ShareCoordinatorService
from kcoord.broker.share.local_state import LocalShareState
from kcoord.protocol.errors import ErrorCode

Answer = tuple[ErrorCode, str | None]
ShareCoordinator = ShareCoordinatorService | LocalShareState
Row = TypeVar("Row")


def share_coordinator(ctx: RequestContext) -> ShareCoordinator:
    service = ctx.broker.share_coordinator
    return service if service is not None else LocalShareState(ctx.broker.share_partitions)


def request_error(group_id: str) -> Answer | None:
    """The error of every partition of the request, or None to answer each (ShareCoordinatorShard's
    checks: an empty group id is INVALID_REQUEST)."""
    if not group_id:
        return ErrorCode.INVALID_REQUEST, "Group id must be specified and non-empty."
    return None


def partition_error(partition: int) -> Answer | None:
    if partition < 0:
        return ErrorCode.INVALID_REQUEST, "Partition id must be non-negative."
    return None


async def each_partition(
        ctx: RequestContext, request: Any,
        answer: Callable[[ShareCoordinator, ShareKey, Any, Answer | None], Awaitable[Row]],
) -> list[tuple[uuid.UUID, list[Row]]]:
    """Each topic's id and its partitions' result rows, in request order: `answer(coordinator, key,
    partition data, error)` builds a row, `error` being the request's or the partition's (None: ask the
    coordinator)."""
    coordinator, failed = share_coordinator(ctx), request_error(request.group_id)
    results = []
    for t in request.topics:
        rows = []
        for p in t.partitions:
            key = (request.group_id, t.topic_id, p.partition)
            rows.append(await answer(coordinator, key, p, failed or partition_error(p.partition)))
        results.append((t.topic_id, rows))
    return results
