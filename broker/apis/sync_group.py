"""SyncGroup (api key 14): the leader hands in the assignment; every member gets its own share once
the group's metadata record is durable.

Versions:
  v0: GroupId, GenerationId, MemberId, Assignments
  v1: ThrottleTimeMs in the response
  v2: same as v1
  v3: GroupInstanceId (KIP-345)
  v4: flexible encoding (KIP-482)
  v5: ProtocolType and ProtocolName, mandatory in the request and echoed back (KIP-559)
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.coordinator.results import SyncGroupResult
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


def error_response(error: ErrorCode) -> m.SyncGroupResponse:
    return m.SyncGroupResponse(error_code=error, protocol_type=None, protocol_name=None, assignment=b"")


@api(key=14, name="SyncGroup", min_version=0, max_version=5)
async def handle(ctx: RequestContext, request: m.SyncGroupRequest):
    version = ctx.api_version
    if version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        # KafkaApis.handleSyncGroupRequest refuses this before the coordinator sees it.
        return error_response(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    result: SyncGroupResult = await ctx.broker.group_coordinator.sync_group(ctx.for_coordinator(), request)
    return m.SyncGroupResponse(error_code=result.error, protocol_type=result.protocol_type,
                               protocol_name=result.protocol_name, assignment=result.assignment or b"")
