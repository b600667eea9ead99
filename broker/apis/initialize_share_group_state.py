"""InitializeShareGroupState (api key 83, v0): a share-partition's state starts (or starts over, at a
newer state epoch) at StartOffset -- ShareCoordinatorShard.initializeState; FENCED_STATE_EPOCH for a state
epoch not newer than the recorded one, NOT_COORDINATOR off the key's share coordinator.

Versions:
  v0: GroupId, Topics / Partitions: Partition, StateEpoch, StartOffset (Kafka 4.1+, flexible)
"""
from __future__ import annotations

from kcoord.broker.apis.share_state_common import Answer, ShareCoordinator, each_partition
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.share.coordinator import ShareKey
from kcoord.protocol import messages as m

R = m.InitializeShareGroupStateResponse


async def _result(coordinator: ShareCoordinator, key: ShareKey, p, error: Answer | None) -> R.PartitionResult:
    code, message = error or await coordinator.initialize(key, p.state_epoch, p.start_offset)
    return R.PartitionResult(partition=p.partition, error_code=code, error_message=message)


@api(key=83, name="InitializeShareGroupState", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.InitializeShareGroupStateRequest):
    return R(results=[R.InitializeStateResult(topic_id=topic_id, partitions=rows)
                      for topic_id, rows in await each_partition(ctx, request, _result)])
