"""DescribeTransactions (key 65): each transactional id's state, producer, timeout and partitions (KIP-664;
TransactionCoordinator.handleDescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND for an unknown id,
COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE as the coordinator answers).

Versions (we serve 0):
  v0: flexible
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.txn.coordinator import TransactionCoordinator

R = m.DescribeTransactionsResponse


@api(key=65, name="DescribeTransactions", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.DescribeTransactionsRequest):
    coordinator = ctx.broker.txn_coordinator.coordinator
    return R(throttle_time_ms=0, transaction_states=[_describe(coordinator, t) for t in request.transactional_ids])


def _describe(coordinator: TransactionCoordinator, transactional_id: str):
    md = coordinator.describe(transactional_id)
    if isinstance(md, ErrorCode):
        return R.TransactionState(error_code=md, transactional_id=transactional_id, transaction_state="",
                                  transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                                  producer_epoch=-1, topics=[])
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(md.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return R.TransactionState(
        error_code=ErrorCode.NONE, transactional_id=transactional_id, transaction_state=md.state.kafka_name,
        transaction_timeout_ms=md.timeout_ms, transaction_start_time_ms=md.start_ms, producer_id=md.producer_id,
        producer_epoch=md.producer_epoch,
        topics=[R.TransactionState.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()])
