"""AddOffsetsToTxn (key 25): add the group's `__consumer_offsets` partition to the transaction, so the
markers reach the offsets that TxnOffsetCommit holds pending (KafkaApis.handleAddOffsetsToTxnRequest).

Versions (we serve 0-4):
  v0: transactional_id, producer id/epoch, group_id
  v1: same as v0
  v2: PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH instead)
  v3: flexible
  v4: TRANSACTION_ABORTABLE may be returned (KIP-890)
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.consumer_offsets import OFFSETS_TOPIC, partition_for
from kcoord.protocol.errors import ErrorCode


@api(key=25, name="AddOffsetsToTxn", min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: m.AddOffsetsToTxnRequest):
    ctx.broker.topics.ensure_consumer_offsets()
    partition = partition_for(request.group_id, ctx.broker.config.get("offsets.topic.num.partitions"))
    error = await ctx.broker.txn_coordinator.coordinator.handle_add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [(OFFSETS_TOPIC, partition)])
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)
