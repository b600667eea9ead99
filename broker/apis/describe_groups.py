"""DescribeGroups (api key 15): state, protocol and members (with metadata and assignment when
Stable) of each requested group.

Versions:
  v0: Groups
  v1: ThrottleTimeMs in the response
  v2: same as v1
  v3: IncludeAuthorizedOperations, AuthorizedOperations (no authorizer here: every group operation)
  v4: GroupInstanceId per member (KIP-345)
  v5: flexible encoding (KIP-482)
  v6: ErrorMessage; an unknown group answers GROUP_ID_NOT_FOUND instead of state "Dead" (KIP-1043),
      and so does a consumer group ("Group X is not a classic group."); before v6 both are "Dead", NONE
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# Without an authorizer Kafka reports every operation a group supports: READ(3), DELETE(6), DESCRIBE(8).
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
UNKNOWN_STATE = ""  # a group we cannot describe right now (Kafka's DescribeGroupsResponse.UNKNOWN_STATE)


def _group(group_id: str, error: ErrorCode, state: str = UNKNOWN_STATE, protocol_type: str = "",
           protocol_data: str = "", members=(), message: str | None = None,
           operations: int = AUTHORIZED_OPERATIONS_OMITTED):
    return m.DescribeGroupsResponse.DescribedGroup(
        error_code=error, error_message=message, group_id=group_id, group_state=state,
        protocol_type=protocol_type, protocol_data=protocol_data, members=list(members),
        authorized_operations=operations)


@api(key=15, name="DescribeGroups", min_version=0, max_version=6)
def handle(ctx: RequestContext, request: m.DescribeGroupsRequest):
    version = ctx.api_version
    groups = ctx.broker.group_coordinator
    wants_operations = version >= 3 and request.include_authorized_operations
    operations = GROUP_OPERATIONS if wants_operations else AUTHORIZED_OPERATIONS_OMITTED
    out = []
    member_type = m.DescribeGroupsResponse.DescribedGroupMember
    for described in groups.describe_groups(request.groups, version):
        message = described.message
        if message is None and described.error == ErrorCode.GROUP_ID_NOT_FOUND:
            message = f"Group {described.group_id} not found."
        members = [member_type(member_id=mm.member_id, group_instance_id=mm.group_instance_id,
                               client_id=mm.client_id, client_host=mm.client_host,
                               member_metadata=mm.metadata, member_assignment=mm.assignment)
                   for mm in described.members]
        out.append(_group(described.group_id, described.error, described.state, described.protocol_type,
                          described.protocol_data, members, message,
                          operations if described.error == ErrorCode.NONE else AUTHORIZED_OPERATIONS_OMITTED))
    return m.DescribeGroupsResponse(groups=out)
