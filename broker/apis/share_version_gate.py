"""share.version gates the share-group APIs as Kafka 4.2's KafkaApis does (isShareGroupProtocolEnabled,
ShareVersion.supportsShareGroups): at level 0 ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
ShareAcknowledge and Describe/Alter/DeleteShareGroupOffsets answer UNSUPPORTED_VERSION (the request's
getErrorResponse: at the top level, or on each group where the response has no top-level error)."""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from kcoord.broker.context import RequestContext
from kcoord.broker.fault_injector import error_response
from kcoord.protocol.errors import ErrorCode

Handler = Callable[[RequestContext, Any], Any]  # async, or plain (answers at once)


def unsupported(ctx: RequestContext, request: Any) -> Any:
    """UNSUPPORTED_VERSION as the API's error response (per group where the response has no top-level error)."""
    return error_response(ctx.api_key, request, ErrorCode.UNSUPPORTED_VERSION)


def requires_share_groups(handler: Handler) -> Handler:
    """The handler, answering UNSUPPORTED_VERSION while share.version is 0."""

    @functools.wraps(handler)
    async def gated(ctx: RequestContext, request: Any) -> Any:
        if request is not None and not ctx.broker.features.share_groups:
            return unsupported(ctx, request)
        response = handler(ctx, request)
        return await response if inspect.isawaitable(response) else response

    return gated
