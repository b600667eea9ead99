"""TxnOffsetCommit (key 28): a transactional producer commits a group's offsets inside its transaction.

Versions (we serve 0-5):
  v0: transactional_id, group_id, producer id/epoch, offsets
  v1: same as v0
  v2: committed_leader_epoch per partition
  v3: flexible; member_id, group_instance_id, generation_id: checked as KIP-447 asks (ILLEGAL_GENERATION,
      UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID)
  v4: TRANSACTION_ABORTABLE may be returned (KIP-890)
  v5: the group's offsets partition is added to the transaction by the commit itself (KIP-890 part 2:
      GroupCoordinatorService.commitTransactionalOffsets with the addPartition operation above v4, no
      AddOffsetsToTxn needed); clients send it when transaction.version 2 is finalized
As Kafka 4 (GroupCoordinatorService.commitTransactionalOffsets, scheduleTransactionalWriteOperation): the
group's `__consumer_offsets` partition must be in the producer's ongoing transaction at its epoch (else
INVALID_TXN_STATE / INVALID_PRODUCER_EPOCH / INVALID_PRODUCER_ID_MAPPING; retriable coordinator errors
answer COORDINATOR_NOT_AVAILABLE), then the offsets are written as a transactional batch and stay
pending until the transaction's marker (kcoord.coordinator.txn_offsets). As KafkaApis.handleTxnOffsetCommitRequest:
partitions that do not exist answer UNKNOWN_TOPIC_OR_PARTITION and only the others go on; v0-1 get
COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.data.append import verify_transactional
from kcoord.broker.registry import api
from kcoord.coordinator.results import OffsetCommit, OffsetCommitRequestPartition
from kcoord.protocol import messages as m
from kcoord.protocol.consumer_offsets import OFFSETS_TOPIC, partition_for
from kcoord.protocol.errors import ErrorCode
from kcoord.txn.metadata import TV_2

R = m.TxnOffsetCommitResponse


class _Producer:  # what verify_transactional reads of a batch header
    __slots__ = ("producer_id", "producer_epoch")

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch


@api(key=28, name="TxnOffsetCommit", min_version=0, max_version=5)
async def handle(ctx: RequestContext, request: m.TxnOffsetCommitRequest):
    v = ctx.api_version
    broker = ctx.broker
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets = []
    for t in request.topics:
        known = broker.topics.get(t.name)
        for p in t.partitions:
            if known is None or not 0 <= p.partition_index < known.partitions:
                errors[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets.append(OffsetCommitRequestPartition(
                    t.name, p.partition_index, p.committed_offset,
                    p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata))
    if offsets:  # as KafkaApis: only partitions that exist go on to the coordinator
        error = await _verify(broker, request, add=v >= 5)
        if error is not None:
            errors.update({(p.topic, p.partition): error for p in offsets})
        else:
            commit = OffsetCommit(request.group_id, request.member_id if v >= 3 else "",
                                  request.group_instance_id if v >= 3 else None,
                                  request.generation_id if v >= 3 else -1, offsets, -1, v)
            errors.update(await broker.group_coordinator.txn_commit_offsets(commit, request.producer_id, request.producer_epoch))
    if v < 2:  # KafkaApis (KAFKA-7296): clients before 2.0 do not know the loading error
        errors = {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE if e == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e
                  for tp, e in errors.items()}
    return _response(request, errors)


async def _verify(broker, request, add: bool) -> ErrorCode | None:
    """The group's offsets partition must be in the transaction (KIP-890 verification; in a cluster asked
    of the transaction coordinator's node when that is another, kcoord.broker.data.txn_verification).
    `add` (v5): the coordinator adds it first, there or in-process."""
    if not request.group_id:
        return ErrorCode.INVALID_GROUP_ID
    tp = (OFFSETS_TOPIC, partition_for(request.group_id, broker.config.get("offsets.topic.num.partitions")))
    verified = None
    if broker.txn_verifier is not None and request.transactional_id:
        verified = await broker.txn_verifier.verify(request.transactional_id, request.producer_id,
                                                    request.producer_epoch, [tp], add=add)
    if verified is None and add and request.transactional_id:
        verified = {tp: await broker.txn_coordinator.coordinator.handle_add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch, [tp], TV_2)}
    elif verified is None and request.transactional_id:
        await broker.txn_coordinator.coordinator.settled(request.transactional_id)
    error = verify_transactional(broker, request.transactional_id, tp,
                                 _Producer(request.producer_id, request.producer_epoch), verified)
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if error == ErrorCode.NOT_ENOUGH_REPLICAS else error


def _response(request, errors: dict[tuple[str, int], ErrorCode]):
    topics = []
    for t in request.topics:
        topics.append(R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            R.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=errors.get((t.name, p.partition_index), ErrorCode.NONE))
            for p in t.partitions]))
    return R(throttle_time_ms=0, topics=topics)
