"""Authorization guards of the partition and config admin APIs, as KafkaApis applies them: ALTER on each
topic for CreatePartitions, DELETE for DeleteRecords, ALTER_CONFIGS on each resource (topic, cluster for a
broker, group) for AlterConfigs / IncrementalAlterConfigs, DESCRIBE on the cluster for DescribeLogDirs,
DESCRIBE on each topic for OffsetForLeaderEpoch (a client's; followers are not ours). Refused entries are
answered with the resource's *_AUTHORIZATION_FAILED beside the handler's answer for the rest."""
from __future__ import annotations

from kcoord.broker.security.acl import AclOperation as Op
from kcoord.broker.security.acl import ResourceType
from kcoord.broker.security.authorize_topics import _CONFIG_RESOURCES, TAF, _with
from kcoord.broker.security.check import allowed, cluster_allowed
from kcoord.broker.security.guard_util import split
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


def create_partitions(ctx, req, handler):
    """KafkaApis.handleCreatePartitionsRequest: ALTER on the topic."""
    R = m.CreatePartitionsResponse
    kept, refused = split(ctx, req.topics, lambda t: t.name, Op.ALTER)
    entries = [R.CreatePartitionsTopicResult(name=t.name, error_code=TAF, error_message=None) for t in refused]
    return _with(req, "topics", kept, handler, ctx, entries, "results", lambda: R(throttle_time_ms=0, results=entries))


def delete_records(ctx, req, handler):
    """KafkaApis.handleDeleteRecordsRequest: DELETE on the topic; every partition of a refused one is answered."""
    R = m.DeleteRecordsResponse
    kept, refused = split(ctx, req.topics, lambda t: t.name, Op.DELETE)
    entries = [R.DeleteRecordsTopicResult(name=t.name, partitions=[R.DeleteRecordsPartitionResult(
        partition_index=p.partition_index, low_watermark=-1, error_code=TAF) for p in t.partitions])
        for t in refused]
    return _with(req, "topics", kept, handler, ctx, entries, "topics", lambda: R(throttle_time_ms=0, topics=entries))


def _alter_configs(response_type):
    def guard(ctx, req, handler):
        """ConfigAdminManager (KafkaApis.handleAlterConfigsRequest / handleIncrementalAlterConfigsRequest):
        ALTER_CONFIGS on the topic, the cluster (a broker) or the group."""
        refused = []
        kept = []
        for res in req.resources:
            kind, error = _CONFIG_RESOURCES.get(res.resource_type, (None, None))
            target = "kafka-cluster" if kind == ResourceType.CLUSTER else res.resource_name
            if kind is not None and not allowed(ctx, Op.ALTER_CONFIGS, kind, target):
                refused.append(response_type.AlterConfigsResourceResponse(
                    error_code=error, error_message=None, resource_type=res.resource_type,
                    resource_name=res.resource_name))
            else:
                kept.append(res)
        return _with(req, "resources", kept, handler, ctx, refused, "responses",
                     lambda: response_type(throttle_time_ms=0, responses=refused))
    return guard


def describe_log_dirs(ctx, req, handler):
    """KafkaApis.handleDescribeLogDirsRequest: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
    (v3+ at the top level) and no directories."""
    if cluster_allowed(ctx, Op.DESCRIBE):
        return handler(ctx, req)
    return m.DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                     results=[])


def offset_for_leader_epoch(ctx, req, handler):
    """KafkaApis.handleOffsetForLeaderEpochRequest: DESCRIBE on the topic for a client."""
    R = m.OffsetForLeaderEpochResponse
    kept, refused = split(ctx, req.topics, lambda t: t.topic, Op.DESCRIBE)
    entries = [R.OffsetForLeaderTopicResult(topic=t.topic, partitions=[R.EpochEndOffset(
        error_code=TAF, partition=p.partition, leader_epoch=-1, end_offset=-1) for p in t.partitions])
        for t in refused]
    return _with(req, "topics", kept, handler, ctx, entries, "topics", lambda: R(throttle_time_ms=0, topics=entries))


GUARDS = {37: create_partitions, 21: delete_records, 33: _alter_configs(m.AlterConfigsResponse),
          44: _alter_configs(m.IncrementalAlterConfigsResponse), 35: describe_log_dirs, 23: offset_for_leader_epoch}
