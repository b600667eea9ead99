"""KIP-890 verification of a transactional produce when the transaction coordinator is another node
(cluster mode; Kafka's AddPartitionsToTxnManager): the partition leader asks the leader of the id's
`__transaction_state` partition, with an AddPartitionsToTxn v4 `verify_only` request, whether its
partitions are in the producer's ongoing transaction. `None` from `verify` means the coordinator is this
node: the produce path asks it in-process, as on a single node. A coordinator that cannot be reached, or
that has no leader now, answers COORDINATOR_NOT_AVAILABLE for every partition (the produce then answers
the retriable NOT_ENOUGH_REPLICAS, kcoord.broker.data.append).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kcoord.broker.data.inter_broker import NodeConnection, by_topic, node_address
from kcoord.cluster.metadata_image import MetadataImage, TopicPartition
from kcoord.cluster.partition_state import NO_LEADER
from kcoord.metadata.topics import TRANSACTION_STATE
from kcoord.protocol import messages as m
from kcoord.protocol.consumer_offsets import partition_for
from kcoord.protocol.errors import ErrorCode

log = logging.getLogger("kcoord.txn.verification")

ADD_PARTITIONS_TO_TXN_KEY, VERIFY_VERSION, ADD_VERSION = 24, 4, 5
REQUEST_TIMEOUT_S = 30.0
Tp = tuple[str, int]


def coordinator_node(image: MetadataImage, transactional_id: str, num_partitions: int) -> int | None:
    """The node leading the id's `__transaction_state` partition now (None: no leader, or no such topic)."""
    found = image.partition(TopicPartition(TRANSACTION_STATE, partition_for(transactional_id, num_partitions)))
    if found is None or found.registration.leader == NO_LEADER or found.registration.leader not in image.brokers:
        return None
    return found.registration.leader


class TxnVerifier:
    def __init__(self, node_id: int, image: Callable[[], MetadataImage], num_partitions: int,
                 local_host: str | None = None) -> None:
        self.node_id = node_id
        self._local_host = local_host  # the connections' source (NodeConnection)
        self._image = image
        self._num_partitions = num_partitions
        self._nodes: dict[int, NodeConnection] = {}

    async def verify(self, transactional_id: str, producer_id: int, epoch: int,
                     partitions: Iterable[Tp], add: bool = False) -> dict[Tp, ErrorCode] | None:
        """`add`: a transaction version 2 produce (v12+): the coordinator adds the partitions (an
        AddPartitionsToTxn v5 that is not verify_only, Kafka's addPartition supported operation)."""
        partitions = sorted(set(partitions))
        coordinator = coordinator_node(self._image(), transactional_id, self._num_partitions)
        if coordinator == self.node_id:
            return None
        if coordinator is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        connection = self._nodes.get(coordinator)
        if connection is None:
            connection = self._nodes[coordinator] = NodeConnection(
                lambda: node_address(self._image(), coordinator), "kcoord-txn-verification", self._local_host)
        Rq = m.AddPartitionsToTxnRequest
        topics = by_topic(partitions)
        request = Rq(transactions=[Rq.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch, verify_only=not add,
            topics=[Rq.AddPartitionsToTxnTopic(name=name, partitions=ps) for name, ps in topics.items()])])
        try:
            response = await connection.request(ADD_PARTITIONS_TO_TXN_KEY, ADD_VERSION if add else VERIFY_VERSION,
                                                request, REQUEST_TIMEOUT_S)
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            log.info("verifying %s with node %d failed: %s", transactional_id, coordinator, exc or type(exc).__name__)
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        errors = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)  # unanswered: retried by the client
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    if (topic.name, p.partition_index) in errors:
                        errors[(topic.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return errors
