"""Shared pieces of the authorization guards: run the handler then amend its answer, split a request's
topics into those the principal may act on and the rest."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.broker.security.acl import ResourceType
from kcoord.broker.security.check import allowed

INT32_MIN = -(2**31)  # authorized_operations when not asked for


def then(response: Any, amend: Callable[[Any], Any]) -> Any:
    """`amend(answer)` once the handler's answer (a value or an awaitable) is there."""
    if hasattr(response, "__await__"):
        async def later():
            return amend(await response)

        return later()
    return amend(response)


def topic_name(ctx: Any, name: str | None, topic_id: Any = None) -> str | None:
    """A request topic's name; by id (newer versions) through the topic table; None if unknown."""
    if name:
        return name
    topic = ctx.broker.topics.by_id(topic_id) if topic_id is not None else None
    return topic.name if topic is not None else None


def split(ctx: Any, items: list, name_of: Callable[[Any], str | None], operation: int,
          resource_type: int = ResourceType.TOPIC) -> tuple[list, list]:
    """(allowed, refused) items; an item whose name is unknown goes on (the handler answers it)."""
    kept, refused = [], []
    for item in items:
        name = name_of(item)
        (kept if name is None or allowed(ctx, operation, resource_type, name) else refused).append(item)
    return kept, refused
