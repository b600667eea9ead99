"""AddPartitionsToTxn (key 24): add data partitions to a producer's ongoing transaction.

Versions (we serve 0-5, as Kafka 4 does):
  v0: transactional_id, producer id/epoch, topics -> per-partition errors
  v1: same as v0
  v2: PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH instead)
  v3: flexible
  v4: batched: several transactions per request, verify_only, a top-level error (KIP-890; what brokers
      send to the transaction coordinator to verify a transactional produce)
  v5: TRANSACTION_ABORTABLE may be returned (KIP-890); sent by a partition leader without verify_only, it
      is the implicit add of a transaction version 2 produce (kcoord.broker.data.txn_verification), and
      the transaction is then a TV2 client's
As KafkaApis.handleAddPartitionsToTxnRequest: a partition we do not know fails the whole transaction
(UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED); otherwise one error for all its
partitions, from the coordinator.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.cluster.metadata_image import TopicPartition
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.txn.metadata import TV_2

R = m.AddPartitionsToTxnResponse


@api(key=24, name="AddPartitionsToTxn", min_version=0, max_version=5)
async def handle(ctx: RequestContext, request: m.AddPartitionsToTxnRequest):
    v = ctx.api_version
    if v < 4:
        topics = _results(await _one(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                     request.v3_and_below_producer_epoch, request.v3_and_below_topics, False))
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=topics)
    results = []
    for t in request.transactions:
        errors = await _one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only)
        results.append(R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_results(errors)))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=results)


async def _one(ctx, transactional_id, producer_id, epoch, topics, verify_only) -> dict[tuple[str, int], ErrorCode]:
    partitions = [(t.name, p) for t in topics for p in t.partitions]
    txns = ctx.broker.txn_coordinator
    cluster = ctx.broker.cluster
    if cluster is None:
        unknown = [tp for tp in partitions if ctx.broker.topics.log(*tp) is None]
    else:  # the cluster's partitions (metadataCache.contains), not only the ones with a replica here
        unknown = [tp for tp in partitions if cluster.image.partition(TopicPartition(*tp)) is None]
    if unknown:
        return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in partitions}
    if verify_only:
        await txns.coordinator.settled(transactional_id)
        return txns.coordinator.verify_partitions(transactional_id, producer_id, epoch, partitions)
    client_version = TV_2 if ctx.api_version >= 4 else None  # v4+ only comes from brokers (KIP-890)
    error = await txns.coordinator.handle_add_partitions(transactional_id, producer_id, epoch, partitions,
                                                         client_version)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return dict.fromkeys(partitions, error)


def _results(errors: dict[tuple[str, int], ErrorCode]) -> list:
    by_topic: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(
            R.AddPartitionsToTxnPartitionResult(partition_index=partition, partition_error_code=error))
    return [R.AddPartitionsToTxnTopicResult(name=topic, results_by_partition=parts) for topic, parts in by_topic.items()]
