"""Authorization guards of the group APIs, as KafkaApis applies them before the coordinator:
READ on the group for JoinGroup, SyncGroup, Heartbeat, LeaveGroup and OffsetCommit (plus READ on each
topic committed), DESCRIBE for OffsetFetch (plus DESCRIBE on each topic), DescribeGroups and
FindCoordinator, DELETE for DeleteGroups and OffsetDelete (plus READ on each topic); ListGroups shows
every group to DESCRIBE on the cluster, else only the groups the principal may DESCRIBE.
A guard is `guard(ctx, request, handler)` -> the answer (or an awaitable of it)."""
from __future__ import annotations

from kcoord.broker.security.acl import AclOperation as Op
from kcoord.broker.security.acl import ResourceType
from kcoord.broker.security.check import allowed, authorized_operations, cluster_allowed
from kcoord.broker.security.guard_util import INT32_MIN, split, then, topic_name
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

GAF = ErrorCode.GROUP_AUTHORIZATION_FAILED
TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _group(ctx, op: int, group_id: str) -> bool:
    return allowed(ctx, op, ResourceType.GROUP, group_id)


def join_group(ctx, req, handler):
    if _group(ctx, Op.READ, req.group_id):
        return handler(ctx, req)
    return m.JoinGroupResponse(error_code=GAF, generation_id=-1, protocol_type=None,
                               protocol_name=None if ctx.api_version >= 7 else "", leader="",
                               member_id=req.member_id, members=[])


def sync_group(ctx, req, handler):
    if _group(ctx, Op.READ, req.group_id):
        return handler(ctx, req)
    return m.SyncGroupResponse(error_code=GAF, protocol_type=None, protocol_name=None, assignment=b"")


def heartbeat(ctx, req, handler):
    return handler(ctx, req) if _group(ctx, Op.READ, req.group_id) else m.HeartbeatResponse(error_code=GAF)


def leave_group(ctx, req, handler):
    if _group(ctx, Op.READ, req.group_id):
        return handler(ctx, req)
    return m.LeaveGroupResponse(error_code=GAF, members=[])


def offset_commit(ctx, req, handler):
    R = m.OffsetCommitResponse

    def failed(topics, code):
        return [R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions]) for t in topics]

    if not _group(ctx, Op.READ, req.group_id):
        return R(topics=failed(req.topics, GAF))
    kept, refused = split(ctx, req.topics, lambda t: topic_name(ctx, t.name, t.topic_id), Op.READ)
    if not refused:
        return handler(ctx, req)
    if not kept:
        return R(topics=failed(refused, TAF))
    req.topics = kept
    return then(handler(ctx, req), lambda r: _extend(r, "topics", failed(refused, TAF)))


def _extend(response, field: str, more: list):
    getattr(response, field).extend(more)
    return response


def _fetch_refused(topic_type, partition_type, topics) -> list:
    """Kafka's UNAUTHORIZED_PARTITION: offset -1, no metadata, TOPIC_AUTHORIZATION_FAILED."""
    return [topic_type(name=t.name, partitions=[
        partition_type(partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=TAF)
        for p in t.partition_indexes]) for t in topics]


def _describable(ctx, topics) -> list:
    return [t for t in topics if allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, t.name)]


def offset_fetch(ctx, req, handler):
    R = m.OffsetFetchResponse
    version = ctx.api_version
    if version >= 8:
        G = R.OffsetFetchResponseGroup
        T, P = G.OffsetFetchResponseTopics, G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
        order = [g.group_id for g in req.groups]
        denied = {g.group_id for g in req.groups if not _group(ctx, Op.DESCRIBE, g.group_id)}
        refused = {}
        for g in req.groups:
            if g.topics is not None and g.group_id not in denied:
                g.topics, refused[g.group_id] = split(ctx, g.topics, lambda t: t.name, Op.DESCRIBE)
        req.groups = [g for g in req.groups if g.group_id not in denied]

        def amend(resp):
            by_id = {g.group_id: g for g in resp.groups}
            for gid, g in by_id.items():
                g.topics = _describable(ctx, g.topics) + _fetch_refused(T, P, refused.get(gid, []))
            resp.groups = [by_id.get(gid) or G(group_id=gid, error_code=GAF, topics=[]) for gid in order]
            return resp

        return then(handler(ctx, req), amend) if req.groups else amend(R(groups=[]))
    T, P = R.OffsetFetchResponseTopic, R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    if not _group(ctx, Op.DESCRIBE, req.group_id):
        if version >= 2:
            return R(error_code=GAF, topics=[])
        return R(topics=[T(name=t.name, partitions=[P(partition_index=p, committed_offset=-1, metadata="",
                                                      error_code=GAF) for p in t.partition_indexes])
                         for t in req.topics])
    refused = []
    if req.topics is not None:
        req.topics, refused = split(ctx, req.topics, lambda t: t.name, Op.DESCRIBE)

    def amend(resp):
        resp.topics = _describable(ctx, resp.topics) + _fetch_refused(T, P, refused)
        return resp

    return then(handler(ctx, req), amend)


def describe_groups(ctx, req, handler):
    R = m.DescribeGroupsResponse
    order = list(req.groups)
    denied = {g for g in order if not _group(ctx, Op.DESCRIBE, g)}
    req.groups = [g for g in order if g not in denied]
    wants_operations = ctx.api_version >= 3 and req.include_authorized_operations

    def amend(resp):
        by_id = {g.group_id: g for g in resp.groups}
        for g in by_id.values():
            if wants_operations and g.error_code == ErrorCode.NONE:
                g.authorized_operations = authorized_operations(ctx, ResourceType.GROUP, g.group_id)
        resp.groups = [by_id.get(g) or R.DescribedGroup(
            error_code=GAF, error_message=None, group_id=g, group_state="", protocol_type="", protocol_data="",
            members=[], authorized_operations=INT32_MIN) for g in order]
        return resp

    return then(handler(ctx, req), amend) if req.groups else amend(R(throttle_time_ms=0, groups=[]))


def list_groups(ctx, req, handler):
    if cluster_allowed(ctx, Op.DESCRIBE):
        return handler(ctx, req)

    def amend(resp):
        resp.groups = [g for g in resp.groups if _group(ctx, Op.DESCRIBE, g.group_id)]
        return resp

    return then(handler(ctx, req), amend)


def delete_groups(ctx, req, handler):
    R = m.DeleteGroupsResponse
    kept, refused = split(ctx, req.groups_names, lambda g: g, Op.DELETE, ResourceType.GROUP)
    failed = [R.DeletableGroupResult(group_id=g, error_code=GAF) for g in refused]
    if not kept:
        return R(throttle_time_ms=0, results=failed)
    req.groups_names = kept
    return then(handler(ctx, req), lambda r: _extend(r, "results", failed))


def offset_delete(ctx, req, handler):
    R = m.OffsetDeleteResponse
    if not _group(ctx, Op.DELETE, req.group_id):
        return R(error_code=GAF, throttle_time_ms=0, topics=[])
    kept, refused = split(ctx, req.topics, lambda t: t.name, Op.READ)
    failed = [R.OffsetDeleteResponseTopic(name=t.name, partitions=[
        R.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=TAF) for p in t.partitions])
        for t in refused]
    req.topics = kept
    return then(handler(ctx, req), lambda r: _extend(r, "topics", failed) if r.error_code == 0 else r)


def _coordinator_key_allowed(ctx, key: str, key_type: int) -> ErrorCode:
    if key_type == 0:
        return ErrorCode.NONE if _group(ctx, Op.DESCRIBE, key) else GAF
    if key_type == 1 and not allowed(ctx, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return ErrorCode.NONE


def find_coordinator(ctx, req, handler):
    R = m.FindCoordinatorResponse
    key_type = req.key_type if ctx.api_version >= 1 else 0
    if ctx.api_version < 4:
        error = _coordinator_key_allowed(ctx, req.key, key_type)
        if error:
            return R(error_code=error, error_message=None, node_id=-1, host="", port=-1)
        return handler(ctx, req)
    order = list(req.coordinator_keys)
    errors = {k: _coordinator_key_allowed(ctx, k, key_type) for k in order}
    req.coordinator_keys = [k for k in order if not errors[k]]

    def amend(resp):
        by_key = {c.key: c for c in resp.coordinators}
        resp.coordinators = [by_key.get(k) or R.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=errors[k],
                                                             error_message=None) for k in order]
        return resp

    return then(handler(ctx, req), amend) if req.coordinator_keys else amend(R(coordinators=[]))


def consumer_group_heartbeat(ctx, req, handler):
    """KafkaApis.handleConsumerGroupHeartbeat: READ on the group, then DESCRIBE on every subscribed topic
    named (TOPIC_AUTHORIZATION_FAILED with the names refused)."""
    R = m.ConsumerGroupHeartbeatResponse
    if not _group(ctx, Op.READ, req.group_id):
        return R(error_code=GAF, error_message=None, member_id=None, member_epoch=-1, heartbeat_interval_ms=0,
                 assignment=None)
    refused = sorted(t for t in (req.subscribed_topic_names or ()) if not allowed(ctx, Op.DESCRIBE, ResourceType.TOPIC, t))
    if refused:
        return R(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=", ".join(refused), member_id=None,
                 member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    return handler(ctx, req)


def consumer_group_describe(ctx, req, handler):
    """KafkaApis.handleConsumerGroupDescribe: DESCRIBE on each group; refused ones answered
    GROUP_AUTHORIZATION_FAILED in place."""
    R = m.ConsumerGroupDescribeResponse
    order = list(req.group_ids)
    denied = {g for g in order if not _group(ctx, Op.DESCRIBE, g)}
    req.group_ids = [g for g in order if g not in denied]

    def amend(resp):
        by_id = {g.group_id: g for g in resp.groups}
        resp.groups = [by_id.get(g) or R.DescribedGroup(
            error_code=GAF, error_message=None, group_id=g, group_state="", group_epoch=-1, assignment_epoch=-1,
            assignor_name="", members=[], authorized_operations=INT32_MIN) for g in order]
        return resp

    return then(handler(ctx, req), amend) if req.group_ids else amend(R(throttle_time_ms=0, groups=[]))


GUARDS = {68: consumer_group_heartbeat, 69: consumer_group_describe, 11: join_group, 14: sync_group, 12: heartbeat, 13: leave_group, 8: offset_commit, 9: offset_fetch,
          15: describe_groups, 16: list_groups, 42: delete_groups, 47: offset_delete, 10: find_coordinator}
