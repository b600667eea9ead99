"""The data partition leader's way to its share-partitions' state in a cluster (Kafka's DefaultStatePersister /
PersisterStateManager): the share-state RPCs to the share coordinator of each key -- the leader of the
`__share_group_state` partition the key hashes to -- or a direct call when that is this node.

The SharePartitionManager computes records as on a single node; here each record becomes the RPC that
asks the share coordinator to write its equivalent (the coordinator decides snapshot or update itself):
the initializing snapshot (snapshot epoch 0) an InitializeShareGroupState, a tombstone a
DeleteShareGroupState, anything else a WriteShareGroupState of its start offset and state batches. A read
(ReadShareGroupState at the partition's leader epoch) comes back as one snapshot record for
SharePartition.load. A coordinator that moved, is loading or is not reachable is retried with a backoff,
as PersisterStateManager does, up to RETRY_FOR_S; then the error is the caller's.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from kcoord.broker.data.inter_broker import NodeConnection, node_address
from kcoord.broker.share.coordinator import SHARE_GROUP_STATE, ShareKey, share_state_configs
from kcoord.cluster.metadata_image import TopicPartition
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.share import records as r

if TYPE_CHECKING:
    from kcoord.broker.app import Broker
    from kcoord.broker.share.coordinator_service import ShareCoordinatorService

log = logging.getLogger("kcoord.share")

INITIALIZE, READ, WRITE, DELETE, READ_SUMMARY = 83, 84, 85, 86, 87
WRITE_VERSION = SUMMARY_VERSION = 1
REQUEST_TIMEOUT_S = 30.0
RETRY_FOR_S = 10.0
BACKOFF_S = 0.1
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_ENOUGH_REPLICAS,
                       ErrorCode.REQUEST_TIMED_OUT})


class ShareStatePersister:
    """`write(key, records, state_epoch)` and `read(key, leader_epoch)` against the key's share coordinator."""

    def __init__(self, broker: Broker, service: ShareCoordinatorService) -> None:
        self.broker = broker
        self.service = service
        self._nodes: dict[int, NodeConnection] = {}
        self._creating: asyncio.Task | None = None

    # ---------------------------------------------------------------- the persister's two calls

    async def write(self, key: ShareKey, records: list, state_epoch: int = 0) -> ErrorCode:
        for record in records:
            error = await self._retrying(lambda rec=record: self._write_one(key, rec, state_epoch))
            if error != ErrorCode.NONE:
                return error
        return ErrorCode.NONE

    async def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, list | None]:
        """The state as one snapshot record (None: the share-partition has no state)."""
        found: list = []

        async def once() -> ErrorCode:
            found.clear()
            error, state = await self._read_one(key, leader_epoch)
            if error == ErrorCode.NONE and state is not None:
                found.append(state)
            return error

        error = await self._retrying(once)
        if error != ErrorCode.NONE:
            return error, None
        if not found or found[0][1] < 0:
            return ErrorCode.NONE, None
        state_epoch, start_offset, batches = found[0]
        record = r.ShareStateRecord(r.SHARE_SNAPSHOT, *key, 0, leader_epoch, start_offset, batches,
                                    r.UNKNOWN_DELIVERY_COMPLETE_COUNT, state_epoch, 0, 0)
        return ErrorCode.NONE, [r.encode(record)]

    async def summary(self, key: ShareKey) -> tuple[ErrorCode, tuple[int, int, int] | None]:
        """ReadShareGroupStateSummary: (start offset, leader epoch, delivery-complete count) or None (no state)."""
        found: list = []

        async def once() -> ErrorCode:
            found.clear()
            node = self._coordinator(key)
            if node is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if node == self.broker.node_id:
                error, state = self.service.summary(key)
                if state is not None:
                    found.append((state.start_offset, state.leader_epoch, state.delivery_complete_count))
                return error
            group_id, topic_id, partition = key
            Rq = m.ReadShareGroupStateSummaryRequest
            request = Rq(group_id=group_id, topics=[Rq.ReadStateSummaryData(topic_id=topic_id, partitions=[
                Rq.PartitionData(partition=partition, leader_epoch=0)])])
            response = await self._send(node, READ_SUMMARY, SUMMARY_VERSION, request)
            if isinstance(response, ErrorCode):
                return response
            p = _only_partition(response)
            if p is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if p.error_code == ErrorCode.NONE and p.start_offset >= 0:
                found.append((p.start_offset, p.leader_epoch, p.delivery_complete_count))
            return ErrorCode(p.error_code)

        error = await self._retrying(once)
        return error, (found[0] if error == ErrorCode.NONE and found else None)

    async def _retrying(self, attempt) -> ErrorCode:
        deadline = time.monotonic() + RETRY_FOR_S
        while True:
            error = await attempt()
            if error not in RETRIABLE or time.monotonic() >= deadline or self.broker.stopping:
                return error
            await asyncio.sleep(BACKOFF_S)

    # ---------------------------------------------------------------- one RPC (or local call)

    async def _write_one(self, key: ShareKey, record, state_epoch: int) -> ErrorCode:
        k, v, _h = record
        group_id, topic_id, partition = key
        if v is None:
            if (node := self._coordinator(key)) is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if node == self.broker.node_id:
                return (await self.service.delete(key))[0]
            Rq = m.DeleteShareGroupStateRequest
            request = Rq(group_id=group_id, topics=[Rq.DeleteStateData(
                topic_id=topic_id, partitions=[Rq.PartitionData(partition=partition)])])
            return await self._remote(node, DELETE, 0, request)
        d = r.decoded(record)
        node = self._coordinator(key)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if d.type == r.SHARE_SNAPSHOT and d.snapshot_epoch == 0:  # the share-partition starts (over)
            epoch = d.state_epoch or 0
            if node == self.broker.node_id:
                return (await self.service.initialize(key, epoch, d.start_offset))[0]
            Ri = m.InitializeShareGroupStateRequest
            request = Ri(group_id=group_id, topics=[Ri.InitializeStateData(topic_id=topic_id, partitions=[
                Ri.PartitionData(partition=partition, state_epoch=epoch, start_offset=d.start_offset)])])
            return await self._remote(node, INITIALIZE, 0, request)
        epoch = state_epoch if d.state_epoch is None else d.state_epoch
        if node == self.broker.node_id:
            return (await self.service.write(key, epoch, d.leader_epoch, d.start_offset, d.state_batches,
                                             d.delivery_complete_count))[0]
        Rw = m.WriteShareGroupStateRequest
        request = Rw(group_id=group_id, topics=[Rw.WriteStateData(topic_id=topic_id, partitions=[Rw.PartitionData(
            partition=partition, state_epoch=epoch, leader_epoch=d.leader_epoch, start_offset=d.start_offset,
            delivery_complete_count=d.delivery_complete_count,
            state_batches=r.message_batches(Rw, d.state_batches))])])
        return await self._remote(node, WRITE, WRITE_VERSION, request)

    async def _read_one(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, tuple | None]:
        """(error, (state epoch, start offset, state batches) or None)."""
        node = self._coordinator(key)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if node == self.broker.node_id:
            error, _message, state = await self.service.read(key, leader_epoch)
            if state is None:
                return error, None
            return error, (state.state_epoch, state.start_offset, state.state_batches())
        group_id, topic_id, partition = key
        Rq = m.ReadShareGroupStateRequest
        request = Rq(group_id=group_id, topics=[Rq.ReadStateData(topic_id=topic_id, partitions=[
            Rq.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
        response = await self._send(node, READ, 0, request)
        if isinstance(response, ErrorCode):
            return response, None
        p = _only_partition(response)
        if p is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if p.error_code != ErrorCode.NONE:
            return ErrorCode(p.error_code), None
        return ErrorCode.NONE, (p.state_epoch, p.start_offset, r.state_batches(p.state_batches))

    async def _remote(self, node: int, api_key: int, version: int, request) -> ErrorCode:
        response = await self._send(node, api_key, version, request)
        if isinstance(response, ErrorCode):
            return response
        p = _only_partition(response)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if p is None else ErrorCode(p.error_code)

    async def _send(self, node: int, api_key: int, version: int, request):
        connection = self._nodes.get(node)
        if connection is None:
            cluster = self.broker.cluster
            assert cluster is not None
            connection = self._nodes[node] = NodeConnection(lambda: node_address(cluster.image, node),
                                                            "kcoord-share-persister")
        try:
            return await connection.request(api_key, version, request, REQUEST_TIMEOUT_S)
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            log.info("share-state request %d to node %d failed: %s", api_key, node, exc or type(exc).__name__)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE

    # ---------------------------------------------------------------- which node

    def _coordinator(self, key: ShareKey) -> int | None:
        """The leader of the key's `__share_group_state` partition (FindCoordinator key type 2's answer),
        None while there is none; the topic is created on first need."""
        cluster = self.broker.cluster
        if cluster is None:
            return None
        image = cluster.image
        topic = image.topics.get(SHARE_GROUP_STATE)
        if topic is None:
            self._create_topic()
            return None
        part = image.partition(TopicPartition(SHARE_GROUP_STATE, r.share_state_partition(*key, len(topic.partitions))))
        if part is None or part.registration.leader not in image.brokers:
            return None
        return part.registration.leader

    def _create_topic(self) -> None:
        if self._creating is not None and not self._creating.done():
            return
        cluster, config = self.broker.cluster, self.broker.config
        assert cluster is not None
        spec = (SHARE_GROUP_STATE, config.get("share.coordinator.state.topic.num.partitions"),
                config.get("share.coordinator.state.topic.replication.factor"),
                {**share_state_configs(),
                 "min.insync.replicas": str(config.get("share.coordinator.state.topic.min.isr"))})
        self._creating = asyncio.get_running_loop().create_task(cluster.create_topics([spec]))


def _only_partition(response):
    for result in response.results:
        for p in result.partitions:
            return p
    return None
