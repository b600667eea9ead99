"""ShareGroupDescribe (api key 77): KIP-932 share groups -- epochs, the assignor ("simple") and per member
its epoch, client, subscription and current assignment.

Versions:
  v0: early access in Kafka 4.0, removed in 4.1: not served
  v1: GroupIds, IncludeAuthorizedOperations; per group ErrorCode, ErrorMessage, GroupState, GroupEpoch,
      AssignmentEpoch, AssignorName, Members, AuthorizedOperations
Flexible from v1. An unknown group answers GROUP_ID_NOT_FOUND ("Group X not found."), a classic or
consumer group's id GROUP_ID_NOT_FOUND ("Group X is not a share group."), as Kafka's shareGroupDescribe.
"""
from __future__ import annotations

from kcoord.broker.apis.describe_groups import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS
from kcoord.broker.apis.share_version_gate import requires_share_groups
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.coordinator.consumer.topics_image import NO_TOPICS
from kcoord.coordinator.share import assignor
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=77, name="ShareGroupDescribe", min_version=1, max_version=1)
@requires_share_groups
def handle(ctx: RequestContext, request: m.ShareGroupDescribeRequest):
    r = m.ShareGroupDescribeResponse
    operations = GROUP_OPERATIONS if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    service = ctx.broker.group_coordinator.service
    topics = NO_TOPICS if service is None else service.topics
    out = []
    described = [(g, ErrorCode.COORDINATOR_NOT_AVAILABLE, None, None) for g in request.group_ids] if service is None \
        else service.share_group_describe(request.group_ids)
    for group_id, error, message, group in described:
        if group is None:
            out.append(r.DescribedGroup(error_code=error, error_message=message, group_id=group_id or "",
                                        group_state="Dead", group_epoch=-1, assignment_epoch=-1, assignor_name="",
                                        members=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            continue
        members = [r.DescribedGroup.Member(
            member_id=mm.member_id, rack_id=mm.rack_id, member_epoch=mm.member_epoch, client_id=mm.client_id,
            client_host=mm.client_host, subscribed_topic_names=list(mm.subscribed_topic_names),
            assignment=r.Assignment(topic_partitions=[
                r.TopicPartitions(topic_id=tid, topic_name=topics.topic_name(tid) or "", partitions=sorted(parts))
                for tid, parts in sorted(mm.assigned.items()) if parts]))
            for mm in sorted(group.members.values(), key=lambda mm: mm.member_id)]
        out.append(r.DescribedGroup(
            error_code=ErrorCode.NONE, error_message=None, group_id=group.group_id, group_state=group.state,
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch, assignor_name=assignor.NAME,
            members=members, authorized_operations=operations))
    return r(throttle_time_ms=0, groups=out)
