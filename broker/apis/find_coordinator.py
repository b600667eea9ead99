"""FindCoordinator (api key 10): which node coordinates a group, a transactional id or a share-partition.
On a single node: this node, for every key (every `__consumer_offsets` partition is led here).

Versions:
  v0: Key (a group id)
  v1: KeyType (0 group, 1 transaction), ThrottleTimeMs, ErrorMessage
  v2: same as v1
  v3: flexible encoding (KIP-482)
  v4: batched CoordinatorKeys, one result per key (KIP-699)
  v5: TRANSACTION_ABORTABLE may be returned (KIP-890); nothing changes for groups
  v6: KeyType 2, share-partitions (KIP-932): key "groupId:topicId:partition", this node's share coordinator
Key type 1 (transaction): this node, once the transaction coordinator runs (kcoord.txn.runtime); a partition
still loading is led here all the same (its requests answer COORDINATOR_LOAD_IN_PROGRESS).

Cluster mode (KafkaApis.getCoordinator): the node that leads the key's partition of `__consumer_offsets`
/ `__transaction_state` / `__share_group_state` (partition_for, Kafka's hash), COORDINATOR_NOT_AVAILABLE while it has none.
An internal topic not created yet is created through the controller with its replication factor
(offsets.topic.replication.factor, transaction.state.log.replication.factor): as Kafka's
AutoTopicCreationManager, the creation is started and COORDINATOR_NOT_AVAILABLE answered at once;
with fewer registered brokers than that factor the controller refuses it, and FindCoordinator keeps
answering COORDINATOR_NOT_AVAILABLE (KIP-115), the factor is never capped.
Both coordinators follow that leadership (kcoord.coordinator.runtime.elections for groups,
kcoord.txn.runtime for transactions): the node named here loads the key's partition when elected (its
requests answer COORDINATOR_LOAD_IN_PROGRESS until then) and every other node answers the key's requests
NOT_COORDINATOR.
"""
from __future__ import annotations

import asyncio
import base64
import logging
from typing import TYPE_CHECKING

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.share.coordinator import SHARE_GROUP_STATE, share_state_configs
from kcoord.cluster.metadata_image import TopicPartition
from kcoord.metadata.topics import CONSUMER_OFFSETS, TRANSACTION_STATE, internal_configs
from kcoord.protocol import messages as m
from kcoord.protocol.consumer_offsets import partition_for
from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kcoord.cluster.node import ClusterNode

log = logging.getLogger("kcoord.find_coordinator")
GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2


Where = tuple[int, str, int]  # node id, host, port


def _lookup(ctx, key: str, key_type: int) -> tuple[ErrorCode, str | None, Where | None]:
    """(error, message, where) for one key; NONE with where None means this node coordinates it."""
    cluster = ctx.broker.cluster
    if cluster is not None and key_type == SHARE_KEY and ctx.api_version >= 6:
        error, message = _share_key(ctx, key)
        if error == ErrorCode.INVALID_REQUEST:
            return error, message, None
    if cluster is not None and key_type in (GROUP_KEY, TRANSACTION_KEY) or \
            cluster is not None and key_type == SHARE_KEY and ctx.api_version >= 6:
        return _in_cluster(ctx, cluster, key, key_type)
    error, message = _local(ctx, key, key_type)
    return error, message, None


_creating: set[asyncio.Task] = set()  # internal topic creations started by FindCoordinator


def _in_cluster(ctx, cluster: ClusterNode, key: str, key_type: int) -> tuple[ErrorCode, str | None, Where | None]:
    config = ctx.broker.config
    if key_type == GROUP_KEY:
        topic, count, rf = (CONSUMER_OFFSETS, config.get("offsets.topic.num.partitions"),
                            config.get("offsets.topic.replication.factor"))
        extra = {}
    elif key_type == SHARE_KEY:
        topic, count, rf = (SHARE_GROUP_STATE, config.get("share.coordinator.state.topic.num.partitions"),
                            config.get("share.coordinator.state.topic.replication.factor"))
        extra = {"min.insync.replicas": str(config.get("share.coordinator.state.topic.min.isr"))}
    else:
        topic, count, rf = (TRANSACTION_STATE, config.get("transaction.state.log.num.partitions"),
                            config.get("transaction.state.log.replication.factor"))
        extra = {"min.insync.replicas": str(config.get("transaction.state.log.min.isr"))}
    unavailable = ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", None
    image = cluster.image
    if topic not in image.topics:
        if not any(t.get_name() == topic for t in _creating):
            configs = share_state_configs() if topic == SHARE_GROUP_STATE else internal_configs(config, topic)
            task = asyncio.ensure_future(cluster.create_topics([(topic, count, rf, {**configs, **extra})]))
            task.set_name(topic)
            _creating.add(task)
            task.add_done_callback(_created)
        return unavailable
    part = image.partition(TopicPartition(topic, partition_for(key, count)))
    leader = None if part is None else image.brokers.get(part.registration.leader)
    if leader is None or not leader.info.listeners:
        return unavailable
    if leader.id == cluster.node_id:
        error, message = _local(ctx, key, key_type)
        return error, message, None
    e = next((e for e in leader.info.listeners if e.name == ctx.listener), leader.info.listeners[0])
    return ErrorCode.NONE, None, (leader.id, e.host, e.port)


def _created(task: asyncio.Task) -> None:
    _creating.discard(task)
    if not task.cancelled() and task.exception() is None:
        for name, result in task.result().items():
            if result.error:
                log.info("creating %s: %s %s", name, result.error.name, result.message or "")


def _local(ctx, key: str, key_type: int) -> tuple[ErrorCode, str | None]:
    """(error, message) for one key; NONE means this node coordinates it."""
    if key_type == GROUP_KEY:
        # A partition still loading is led here all the same: its group requests answer
        # COORDINATOR_LOAD_IN_PROGRESS, which clients retry against the same node.
        if not ctx.broker.group_coordinator.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        return ErrorCode.NONE, None
    if key_type == TRANSACTION_KEY:
        if not ctx.broker.txn_coordinator.coordinator.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
        return ErrorCode.NONE, None
    if key_type == SHARE_KEY and ctx.api_version >= 6:
        return _share_key(ctx, key)
    return ErrorCode.INVALID_REQUEST, f"Unknown coordinator key type {key_type}."


def _share_key(ctx, key: str) -> tuple[ErrorCode, str | None]:
    """Key type 2 (KIP-932): a share-partition's "groupId:topicId:partition" (SharePartitionKey.validate:
    INVALID_REQUEST when it does not parse); this node's share coordinator, single-node. In a cluster the
    key's partition of __share_group_state picks the node (its leader, where the share coordinator runs:
    kcoord.broker.share.coordinator_service)."""
    group_id, topic_id, partition = (key.rsplit(":", 2) + ["", ""])[:3] if key.count(":") >= 2 else ("", "", "")
    try:
        valid = bool(group_id) and len(base64.urlsafe_b64decode(topic_id + "==")) == 16 and int(partition) >= 0
    except ValueError:
        valid = False
    if not valid:
        return ErrorCode.INVALID_REQUEST, f"Invalid coordinator key {key!r} for key type 2 (share)."
    if not ctx.broker.share_partitions.coordinator.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
    return ErrorCode.NONE, None


@api(key=10, name="FindCoordinator", min_version=0, max_version=6)
async def handle(ctx: RequestContext, request: m.FindCoordinatorRequest):
    version = ctx.api_version
    key_type = request.key_type if version >= 1 else GROUP_KEY
    endpoint = ctx.broker.endpoint_for(ctx.listener)
    node_id, host, port = ctx.node_id, endpoint.host, endpoint.port
    here = (node_id, host, port)
    if version < 4:
        error, message, where = _lookup(ctx, request.key, key_type)
        if error:
            return m.FindCoordinatorResponse(error_code=error, error_message=message,
                                             node_id=-1, host="", port=-1)
        node, at, on = where or here
        return m.FindCoordinatorResponse(error_code=ErrorCode.NONE, error_message=None,
                                         node_id=node, host=at, port=on)
    coordinators = []
    for key in request.coordinator_keys:
        error, message, where = _lookup(ctx, key, key_type)
        node, at, on = (where or here) if error == ErrorCode.NONE else (-1, "", -1)
        coordinators.append(m.FindCoordinatorResponse.Coordinator(
            key=key, node_id=node, host=at, port=on, error_code=error, error_message=message))
    return m.FindCoordinatorResponse(coordinators=coordinators)
