"""ReadShareGroupStateSummary (api key 87, v0-1): a share-partition's state epoch, leader epoch and start
offset as recorded, for DescribeShareGroupOffsets (ShareCoordinatorShard.readStateSummary; nothing is
written). No state: StartOffset -1.

Versions:
  v0: StateEpoch, LeaderEpoch, StartOffset (flexible)
  v1: DeliveryCompleteCount (KIP-1226, Kafka 4.2)
"""
from __future__ import annotations

from kcoord.broker.apis.share_state_common import Answer, ShareCoordinator, each_partition
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.share.coordinator import ShareKey
from kcoord.protocol import messages as m

R = m.ReadShareGroupStateSummaryResponse


async def _result(coordinator: ShareCoordinator, key: ShareKey, p, error: Answer | None) -> R.PartitionResult:
    state = None
    if error is None:  # the coordinator's state is None unless it answers NONE
        code, state = coordinator.summary(key)
        error = code, None
    code, message = error
    return R.PartitionResult(
        partition=p.partition, error_code=code, error_message=message,
        state_epoch=state.state_epoch if state is not None else 0,
        leader_epoch=state.leader_epoch if state is not None else -1,
        start_offset=state.start_offset if state is not None else -1,
        delivery_complete_count=state.delivery_complete_count if state is not None else -1)


@api(key=87, name="ReadShareGroupStateSummary", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: m.ReadShareGroupStateSummaryRequest):
    return R(results=[R.ReadStateSummaryResult(topic_id=topic_id, partitions=rows)
                      for topic_id, rows in await each_partition(ctx, request, _result)])
