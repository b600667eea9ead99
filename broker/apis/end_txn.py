"""EndTxn (key 26): commit or abort the producer's transaction (KafkaApis.handleEndTxnRequest).

Versions (we serve 0-4):
  v0: transactional_id, producer id/epoch, committed
  v1: same as v0
  v2: PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH instead)
  v3: flexible
  v4: TRANSACTION_ABORTABLE may be returned (KIP-890)
v5 (KIP-890 part 2: the epoch bumped at every transaction end) is not served: kcoord's coordinator runs
transaction version 1, and clients only use v5 when the broker finalizes transaction.version 2.
The answer is due once PrepareCommit/PrepareAbort is durable (the markers follow, kcoord.txn.coordinator); it
waits up to MARKER_WAIT_S more for the markers, so the producer's next transaction does not start with
CONCURRENT_TRANSACTIONS and a client retry backoff (kcoord.txn.runtime.wait_completed).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

MARKER_WAIT_S = 1.0


@api(key=26, name="EndTxn", min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: m.EndTxnRequest):
    txns = ctx.broker.txn_coordinator
    error = await txns.coordinator.handle_end_transaction(request.transactional_id, request.producer_id,
                                                          request.producer_epoch, request.committed)
    if error == ErrorCode.NONE:
        await txns.wait_completed(request.transactional_id, MARKER_WAIT_S)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return m.EndTxnResponse(throttle_time_ms=0, error_code=error)
