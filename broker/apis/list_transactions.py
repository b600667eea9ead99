"""ListTransactions (key 66): the transactional ids the coordinator knows, filtered (KIP-664).

Versions (we serve 0-2):
  v0: state filters, producer id filters; unknown state names are listed back
  v1: duration filter: transactions running longer than that many ms (KIP-994)
  v2: transactional id pattern, a regular expression the whole id must match (KIP-1152);
      INVALID_REGULAR_EXPRESSION if it does not compile
"""
from __future__ import annotations

import time

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.txn.admin import list_transactions

R = m.ListTransactionsResponse


@api(key=66, name="ListTransactions", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: m.ListTransactionsRequest):
    txns = ctx.broker.txn_coordinator
    if not txns.coordinator.active:
        return R(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, unknown_state_filters=[],
                 transaction_states=[])
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    pattern = request.transactional_id_pattern if ctx.api_version >= 2 else None
    listed = list_transactions(txns.state, set(request.producer_id_filters), list(request.state_filters), duration,
                               int(time.time() * 1000), pattern)
    return R(throttle_time_ms=0, error_code=listed.error, unknown_state_filters=listed.unknown_state_filters,
             transaction_states=[R.TransactionState(transactional_id=md.transactional_id, producer_id=md.producer_id,
                                                    transaction_state=md.state.kafka_name)
                                 for md in listed.transactions])
