"""WriteTxnMarkers (key 27): write COMMIT/ABORT markers to partitions (KafkaApis.handleWriteTxnMarkersRequest).

Versions (we serve 1-2; v0 was removed in Kafka 4.0):
  v1: flexible; per marker: producer id and epoch, result, coordinator epoch, partitions
  v2: per marker its TransactionVersion (KIP-1228): a TV2 marker's epoch must be above the producer's
      current epoch at the partition, not only at it (kcoord.broker.data.txn_markers)
kcoord's transaction coordinator writes the markers of partitions led on its own node in-process
(kcoord.broker.data.txn_markers) and sends this request to the leaders of the others (cluster mode,
kcoord.broker.data.txn_marker_channel); admin tools send it to abort a hanging transaction
(kafka-transactions.sh abort, KIP-664). Per partition: UNKNOWN_TOPIC_OR_PARTITION for one we do not have,
NOT_LEADER_OR_FOLLOWER on a node not leading it (cluster mode; the marker waits for the ISR there),
INVALID_PRODUCER_EPOCH when the producer already wrote with a newer epoch there,
TRANSACTION_COORDINATOR_FENCED when its last marker there came from a newer coordinator epoch,
KAFKA_STORAGE_ERROR when the append or its fsync failed;
`__consumer_offsets` partitions go through the group coordinator (pending transactional offsets), with
the coordinator epoch (TRANSACTION_COORDINATOR_FENCED for an older one); its COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS and NOT_COORDINATOR answer NOT_LEADER_OR_FOLLOWER, the errors a transaction
coordinator expects (KafkaApis.handleWriteTxnMarkersRequest), so it retries with the leader looked up again.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.consumer_offsets import OFFSETS_TOPIC
from kcoord.protocol.errors import ErrorCode

R = m.WriteTxnMarkersResponse
T = R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult
_NOT_READY = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.NOT_COORDINATOR})


def _answer(topic: str, error: int) -> int:
    """A group coordinator not ready for a `__consumer_offsets` marker answers as a partition not led here."""
    return ErrorCode.NOT_LEADER_OR_FOLLOWER if topic == OFFSETS_TOPIC and error in _NOT_READY else error


@api(key=27, name="WriteTxnMarkers", min_version=1, max_version=2)
async def handle(ctx: RequestContext, request: m.WriteTxnMarkersRequest):
    writer = ctx.broker.txn_coordinator.markers
    results = []
    for marker in request.markers:
        partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
        errors = await writer.write(marker.producer_id, marker.producer_epoch, marker.transaction_result, partitions,
                                    marker.coordinator_epoch, marker.transaction_version if ctx.api_version >= 2 else 0)
        results.append(R.WritableTxnMarkerResult(producer_id=marker.producer_id, topics=[
            T(name=t.name, partitions=[T.WritableTxnMarkerPartitionResult(
                partition_index=p, error_code=_answer(t.name, errors[(t.name, p)])) for p in t.partition_indexes])
            for t in marker.topics]))
    return R(markers=results)
