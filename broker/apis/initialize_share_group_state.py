"""InitializeShareGroupState (api key 83, v0): a share-partition's state starts (or starts over, at a
newer state epoch) at StartOffset -- ShareCoordinatorShard.initializeState; FENCED_STATE_EPOCH for a state
epoch not newer than the recorded one, NOT_COORDINATOR off the key's share coordinator.

Versions:
  v0: GroupId, Topics / Partitions: Partition, StateEpoch, StartOffset (Kafka 4.1+, flexible)
"""
from __future__ import annotations

from kcoord.broker.apis.share_state_common import partition_error, request_error, share_coordinator
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m


@api(key=83, name="InitializeShareGroupState", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.InitializeShareGroupStateRequest):
    R = m.InitializeShareGroupStateResponse
    service, failed = share_coordinator(ctx), request_error(ctx, request.group_id)
    results = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            answer = failed or partition_error(p.partition)
            if answer is None and service is not None:
                answer = await service.initialize((request.group_id, t.topic_id, p.partition), p.state_epoch,
                                                  p.start_offset)
            assert answer is not None
            partitions.append(R.PartitionResult(partition=p.partition, error_code=answer[0], error_message=answer[1]))
        results.append(R.InitializeStateResult(topic_id=t.topic_id, partitions=partitions))
    return R(results=results)
