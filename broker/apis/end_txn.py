"""EndTxn (key 26): commit or abort the producer's transaction (KafkaApis.handleEndTxnRequest).

Versions (we serve 0-5):
  v0: transactional_id, producer id/epoch, committed
  v1: same as v0
  v2: PRODUCER_FENCED (older versions get INVALID_PRODUCER_EPOCH instead)
  v3: flexible
  v4: TRANSACTION_ABORTABLE may be returned (KIP-890)
  v5: the producer id and epoch in the response (KIP-890 part 2): the request is a transaction version 2
      client's (KafkaApis.handleEndTxnRequest: version > 4 is TV_2), so the end bumps the epoch and the
      answer carries the epoch (or, once it ran out, the new producer id at epoch 0) the client goes on with.
      Clients send it when transaction.version 2 is finalized (kcoord.metadata.features).
The answer is due once PrepareCommit/PrepareAbort is durable, as TransactionCoordinator.endTransaction's
(its append callback answers, then hands the markers to the marker channel); the markers follow in the
background (kcoord.txn.coordinator), and the producer's next request waits for them there
(kcoord.txn.runtime.wait_completed) rather than meeting CONCURRENT_TRANSACTIONS.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.txn.metadata import TV_0, TV_2


@api(key=26, name="EndTxn", min_version=0, max_version=5)
async def handle(ctx: RequestContext, request: m.EndTxnRequest):
    txns = ctx.broker.txn_coordinator
    error, producer_id, epoch = await txns.coordinator.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
        TV_2 if ctx.api_version >= 5 else TV_0)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return m.EndTxnResponse(throttle_time_ms=0, error_code=error, producer_id=producer_id, producer_epoch=epoch)
