"""InitProducerId (key 22): a producer id and epoch for an idempotent producer.

Versions (we serve 0-4):
  v0: transactional_id (null for idempotence only), transaction timeout
  v1: same as v0
  v2: flexible
  v3: producer_id/epoch in the request, to bump the epoch of a known id (KIP-360)
  v4: same as v3
Ids come from fsynced blocks, so they are never reused after a restart. Transactions are not
supported: a non-null transactional_id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which every client
reports as a clear, fatal error rather than retrying forever.
"""
from __future__ import annotations

from broker.registry import api
from protocol import messages as m
from protocol.errors import ErrorCode


@api(key=22, name="InitProducerId", min_version=0, max_version=4)
async def handle(ctx, request):
    if request.transactional_id is not None:
        return m.InitProducerIdResponse(throttle_time_ms=0, producer_id=-1, producer_epoch=-1,
                                        error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    pid_in = request.producer_id if ctx.api_version >= 3 else -1
    epoch_in = request.producer_epoch if ctx.api_version >= 3 else -1
    error, pid, epoch = ctx.broker.producers.init_producer(pid_in, epoch_in)
    return m.InitProducerIdResponse(throttle_time_ms=0, error_code=error, producer_id=pid, producer_epoch=epoch)
