"""WriteShareGroupState (api key 85, v0-1): what a share-partition's leader changed -- its start offset
(-1: unchanged) and the state batches of the offsets that changed -- made durable by the share coordinator
before the leader answers its consumer (ShareCoordinatorShard.writeState). v1 carries DeliveryCompleteCount
(KIP-1226; -1 before). FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for an older epoch than recorded,
UNKNOWN_TOPIC_OR_PARTITION for a share-partition never initialized.

Versions:
  v0: StateEpoch, LeaderEpoch, StartOffset, StateBatches (flexible)
  v1: DeliveryCompleteCount (KIP-1226, Kafka 4.2)
"""
from __future__ import annotations

from kcoord.broker.apis.share_state_common import Answer, ShareCoordinator, each_partition
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.share.coordinator import ShareKey
from kcoord.protocol import messages as m
from kcoord.share import records as r

R = m.WriteShareGroupStateResponse


@api(key=85, name="WriteShareGroupState", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: m.WriteShareGroupStateRequest):
    v1 = ctx.api_version >= 1

    async def result(coordinator: ShareCoordinator, key: ShareKey, p, error: Answer | None) -> R.PartitionResult:
        code, message = error or await coordinator.write(key, p.state_epoch, p.leader_epoch, p.start_offset,
                                                         r.state_batches(p.state_batches),
                                                         p.delivery_complete_count if v1 else -1)
        return R.PartitionResult(partition=p.partition, error_code=code, error_message=message)

    return R(results=[R.WriteStateResult(topic_id=topic_id, partitions=rows)
                      for topic_id, rows in await each_partition(ctx, request, result)])
