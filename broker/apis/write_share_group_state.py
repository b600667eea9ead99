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

from kcoord.broker.apis.share_state_common import partition_error, request_error, share_coordinator
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.share.coordinator_service import state_batches
from kcoord.protocol import messages as m


@api(key=85, name="WriteShareGroupState", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: m.WriteShareGroupStateRequest):
    R = m.WriteShareGroupStateResponse
    service, failed = share_coordinator(ctx), request_error(ctx, request.group_id)
    results = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            answer = failed or partition_error(p.partition)
            if answer is None and service is not None:
                answer = await service.write((request.group_id, t.topic_id, p.partition), p.state_epoch,
                                             p.leader_epoch, p.start_offset, state_batches(p.state_batches),
                                             p.delivery_complete_count if ctx.api_version >= 1 else -1)
            assert answer is not None
            partitions.append(R.PartitionResult(partition=p.partition, error_code=answer[0], error_message=answer[1]))
        results.append(R.WriteStateResult(topic_id=t.topic_id, partitions=partitions))
    return R(results=results)
