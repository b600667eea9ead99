"""ListGroups (api key 16): every group this coordinator knows, optionally filtered by state.

Versions:
  v0: GroupId and ProtocolType per group
  v1: ThrottleTimeMs in the response
  v2: same as v1
  v3: flexible encoding (KIP-482)
  v4: StatesFilter in the request, GroupState per group (KIP-518)
  v5: TypesFilter, GroupType (KIP-848): "classic" or "consumer" (case-insensitive filter)
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m


@api(key=16, name="ListGroups", min_version=0, max_version=5)
def handle(ctx: RequestContext, request: m.ListGroupsRequest):
    version = ctx.api_version
    states = list(request.states_filter) if version >= 4 else []
    types = {t.lower() for t in request.types_filter} if version >= 5 else set()
    error, listed = ctx.broker.group_coordinator.list_groups(states)
    if error:
        return m.ListGroupsResponse(error_code=error, groups=[])
    if types:
        listed = [g for g in listed if g.group_type in types]
    group_type = m.ListGroupsResponse.ListedGroup
    return m.ListGroupsResponse(error_code=0, groups=[
        group_type(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type)
        for g in listed])
