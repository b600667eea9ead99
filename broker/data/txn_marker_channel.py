"""Transaction markers to each partition's current leader, on this node or another (cluster mode; Kafka's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Each round groups the partitions still waiting for their marker by the leader the metadata image names
now (`plan_round`, pure): those led here are written in-process (`write_local`, the same code the
WriteTxnMarkers handler runs), the others go as one WriteTxnMarkers v1 per leader, carrying the
coordinator epoch, over a connection kept per node. What comes back decides each partition
(`classify`): written; retried after a short backoff with the leader looked up again (no leader now,
NOT_LEADER_OR_FOLLOWER, the ISR short, a timeout, a lost connection: the completion handler's retriable
errors); dropped (its topic is gone, or the producer already has a newer epoch there); or fenced
(TRANSACTION_COORDINATOR_FENCED: a newer coordinator owns the transaction, so this one stops, raising
CoordinatorFenced, and never writes CompleteCommit/CompleteAbort).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from kcoord.broker.data.inter_broker import NodeConnection, by_topic, node_address
from kcoord.cluster.metadata_image import MetadataImage, TopicPartition
from kcoord.cluster.partition_state import NO_LEADER
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.txn.coordinator import CoordinatorFenced

log = logging.getLogger("kcoord.txn.markers")

WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION = 27, 2  # v2: the marker's TransactionVersion (KIP-1228)
RETRY_BACKOFF_S = 0.1      # retry.backoff.ms, before the leaders are looked up again
REQUEST_TIMEOUT_S = 35.0   # above the leader's own acks=-1 wait (request.timeout.ms, 30 s)

Tp = tuple[str, int]
E = ErrorCode
# TransactionMarkerRequestCompletionHandler: these leave the partition to be sent again (to whichever node
# leads it by then); the coordinator errors come from `__consumer_offsets` partitions still loading.
RETRIABLE = frozenset({E.NOT_LEADER_OR_FOLLOWER, E.LEADER_NOT_AVAILABLE, E.NOT_ENOUGH_REPLICAS,
                       E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
                       E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                       E.NOT_COORDINATOR, E.UNKNOWN_SERVER_ERROR, E.FENCED_LEADER_EPOCH})


@dataclass(slots=True)
class Round:
    """One round's destinations: leader node -> partitions; partitions with no leader now; ones gone."""
    by_leader: dict[int, set[Tp]] = field(default_factory=dict)
    leaderless: set[Tp] = field(default_factory=set)
    gone: set[Tp] = field(default_factory=set)


def plan_round(image: MetadataImage, partitions: Iterable[Tp]) -> Round:
    """Where each partition's marker goes now, from the metadata image."""
    plan = Round()
    for tp in partitions:
        found = image.partition(TopicPartition(*tp))
        if found is None:
            plan.gone.add(tp)  # the topic was deleted: Kafka drops its markers too
        elif found.registration.leader == NO_LEADER or found.registration.leader not in image.brokers:
            plan.leaderless.add(tp)
        else:
            plan.by_leader.setdefault(found.registration.leader, set()).add(tp)
    return plan


def classify(errors: dict[Tp, ErrorCode]) -> tuple[set[Tp], set[Tp]]:
    """(to retry, fenced) among one round's answers; the rest are done (written or dropped)."""
    retry = {tp for tp, error in errors.items() if error in RETRIABLE}
    fenced = {tp for tp, error in errors.items() if error == E.TRANSACTION_COORDINATOR_FENCED}
    return retry, fenced


LocalWrite = Callable[[int, int, bool, set, int, int], Awaitable[dict]]


class TxnMarkerChannel:
    """Sends a transaction's markers to every partition's leader until each is written (see the module
    docstring). `image()` is the node's current MetadataImage; `write_local` writes markers on this node;
    `local_host` is this node's listener host, the connections' source (NodeConnection)."""

    def __init__(self, node_id: int, image: Callable[[], MetadataImage], write_local: LocalWrite,
                 local_host: str | None = None) -> None:
        self.node_id = node_id
        self._local_host = local_host
        self._image = image
        self._write_local = write_local
        self._nodes: dict[int, NodeConnection] = {}

    async def send(self, producer_id: int, epoch: int, commit: bool, partitions: Iterable[Tp],
                   coordinator_epoch: int, transaction_version: int = 0) -> None:
        left = set(partitions)
        while left:
            plan = plan_round(self._image(), left)
            for tp in plan.gone:
                log.info("dropping the marker for %s-%d: the partition is gone", *tp)
            rounds = [self._to(leader, producer_id, epoch, commit, tps, coordinator_epoch, transaction_version)
                      for leader, tps in plan.by_leader.items()]
            errors: dict[Tp, ErrorCode] = {}
            for answer in await asyncio.gather(*rounds):
                errors.update(answer)
            retry, fenced = classify(errors)
            if fenced:
                raise CoordinatorFenced(f"markers for producer {producer_id} refused on {sorted(fenced)}: "
                                        f"coordinator epoch {coordinator_epoch} is not the newest")
            for tp, error in errors.items():
                if error != E.NONE and tp not in retry:
                    log.info("dropping the marker for %s-%d: %s", *tp, error.name)
            left = retry | plan.leaderless
            if left:
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _to(self, leader: int, producer_id: int, epoch: int, commit: bool, tps: set[Tp],
                  coordinator_epoch: int, transaction_version: int) -> dict[Tp, ErrorCode]:
        if leader == self.node_id:
            answer = await self._write_local(producer_id, epoch, commit, tps, coordinator_epoch, transaction_version)
            return {tp: ErrorCode(error) for tp, error in answer.items()}
        connection = self._nodes.get(leader)
        if connection is None:
            connection = self._nodes[leader] = NodeConnection(lambda: node_address(self._image(), leader),
                                                              "kcoord-txn-markers", self._local_host)
        Rq = m.WriteTxnMarkersRequest
        topics = by_topic(tps)
        request = Rq(markers=[Rq.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch, transaction_version=transaction_version,
            topics=[Rq.WritableTxnMarkerTopic(name=name, partition_indexes=ps) for name, ps in topics.items()])])
        try:
            response = await connection.request(WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION, request,
                                                REQUEST_TIMEOUT_S)
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            log.info("WriteTxnMarkers to node %d failed (%s); retrying", leader, exc or type(exc).__name__)
            return dict.fromkeys(tps, E.NETWORK_EXCEPTION)
        errors: dict[Tp, ErrorCode] = dict.fromkeys(tps, E.UNKNOWN_SERVER_ERROR)  # unanswered ones go again
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if (topic.name, p.partition_index) in errors:
                        errors[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return errors

    async def close(self) -> None:
        nodes, self._nodes = list(self._nodes.values()), {}
        await asyncio.gather(*(n.close() for n in nodes), return_exceptions=True)
