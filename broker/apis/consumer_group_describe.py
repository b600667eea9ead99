"""ConsumerGroupDescribe (api key 69): KIP-848 consumer groups -- epochs, the assignor, and per member
its epoch, subscription, current assignment and target assignment.

Versions:
  v0: GroupIds, IncludeAuthorizedOperations; per group ErrorCode, ErrorMessage, GroupState, GroupEpoch,
      AssignmentEpoch, AssignorName, Members, AuthorizedOperations
  v1: MemberType per member (KIP-1099): 0 a classic member (online migration), 1 a consumer-protocol one
Flexible from v0. An unknown group, or a classic one, answers GROUP_ID_NOT_FOUND.
"""
from __future__ import annotations

from kcoord.broker.apis.describe_groups import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


def _assignment(topic_partitions) -> object:
    g = m.ConsumerGroupDescribeResponse
    return g.Assignment(topic_partitions=[g.TopicPartitions(topic_id=tid, topic_name=name, partitions=parts)
                                          for tid, name, parts in topic_partitions])


CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # MemberType (ConsumerGroupMember.asConsumerGroupDescribeMember)


@api(key=69, name="ConsumerGroupDescribe", min_version=0, max_version=1)
def handle(ctx: RequestContext, request: m.ConsumerGroupDescribeRequest):
    r = m.ConsumerGroupDescribeResponse
    if not ctx.broker.features.consumer_protocol:  # group.version 0 (metadata/features.py)
        return r(throttle_time_ms=0, groups=[r.DescribedGroup(group_id=g, error_code=ErrorCode.UNSUPPORTED_VERSION)
                                             for g in request.group_ids])
    operations = GROUP_OPERATIONS if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    out = []
    for g in ctx.broker.group_coordinator.consumer_group_describe(request.group_ids):
        members = [r.DescribedGroup.Member(
            member_id=mm.member_id, instance_id=mm.instance_id, rack_id=mm.rack_id, member_epoch=mm.member_epoch,
            client_id=mm.client_id, client_host=mm.client_host, subscribed_topic_names=mm.subscribed_topic_names,
            subscribed_topic_regex=mm.subscribed_topic_regex, assignment=_assignment(mm.assignment),
            target_assignment=_assignment(mm.target_assignment),
            member_type=CLASSIC_MEMBER if mm.classic else CONSUMER_MEMBER) for mm in g.members]
        ok = g.error == ErrorCode.NONE
        out.append(r.DescribedGroup(
            error_code=g.error, error_message=g.message, group_id=g.group_id, group_state=g.state,
            group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch, assignor_name=g.assignor_name,
            members=members, authorized_operations=operations if ok else AUTHORIZED_OPERATIONS_OMITTED))
    return r(throttle_time_ms=0, groups=out)
