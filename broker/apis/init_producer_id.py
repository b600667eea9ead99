"""InitProducerId (key 22): a producer id and epoch, for an idempotent or a transactional producer.

Versions (we serve 0-5):
  v0: transactional_id (null for idempotence only), transaction timeout
  v1: same as v0
  v2: flexible
  v3: producer_id/epoch in the request, to bump the epoch of a known id (KIP-360)
  v4: PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH instead, as KafkaApis maps it)
  v5: TRANSACTION_ABORTABLE may be returned (KIP-890)
Idempotent ids come from fsynced blocks, so they are never reused after a restart. A transactional id
goes to the transaction coordinator (kcoord.txn.coordinator.handle_init_producer_id): epoch bump, fencing of
an older producer of the same id, abort of its open transaction. In cluster mode, a node that has no
producer-id block yet answers COORDINATOR_LOAD_IN_PROGRESS (RPCProducerIdManager.generateProducerId's
failure, as TransactionCoordinator.handleInitProducerId returns it), which clients retry.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=22, name="InitProducerId", min_version=0, max_version=5)
async def handle(ctx: RequestContext, request: m.InitProducerIdRequest):
    pid_in = request.producer_id if ctx.api_version >= 3 else -1
    epoch_in = request.producer_epoch if ctx.api_version >= 3 else -1
    if request.transactional_id is not None:
        txns = ctx.broker.txn_coordinator
        if (pid_in < 0) != (epoch_in < 0):  # KafkaApis: a producer id without an epoch, or the reverse
            error, pid, epoch = ErrorCode.INVALID_REQUEST, -1, -1
        else:
            expected = (pid_in, epoch_in) if pid_in >= 0 else None
            # no producer id block yet (cluster mode) reaches the coordinator as COORDINATOR_LOAD_IN_PROGRESS
            error, pid, epoch = await txns.coordinator.handle_init_producer_id(
                request.transactional_id, request.transaction_timeout_ms, expected)
        if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return m.InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=pid, producer_epoch=epoch)
    error, pid, epoch = ctx.broker.producers.init_producer(pid_in, epoch_in)
    return m.InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=pid, producer_epoch=epoch)
