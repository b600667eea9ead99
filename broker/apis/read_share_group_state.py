"""ReadShareGroupState (api key 84, v0): a share-partition's state for its (new) leader, which reads it
before serving (SharePartition.maybeInitialize through the persister). ShareCoordinatorShard.readState: a
share-partition with no state answers StartOffset -1, StateEpoch 0; a LeaderEpoch older than the recorded
one is FENCED_LEADER_EPOCH, a newer one is recorded before the answer (readStateAndMaybeUpdateLeaderEpoch).

Versions:
  v0: Partition, LeaderEpoch in; StateEpoch, StartOffset, StateBatches out (flexible)
"""
from __future__ import annotations

from kcoord.broker.apis.share_state_common import Answer, ShareCoordinator, each_partition
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.share.coordinator import ShareKey
from kcoord.protocol import messages as m
from kcoord.share import records as r

R = m.ReadShareGroupStateResponse


async def _result(coordinator: ShareCoordinator, key: ShareKey, p, error: Answer | None) -> R.PartitionResult:
    # the coordinator's state is None unless it answers NONE for an initialized share-partition
    code, message, state = (*error, None) if error else await coordinator.read(key, p.leader_epoch)
    return R.PartitionResult(
        partition=p.partition, error_code=code, error_message=message,
        state_epoch=state.state_epoch if state is not None else 0,
        start_offset=state.start_offset if state is not None else -1,
        state_batches=r.message_batches(R, state.state_batches() if state is not None else ()))


@api(key=84, name="ReadShareGroupState", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.ReadShareGroupStateRequest):
    return R(results=[R.ReadStateResult(topic_id=topic_id, partitions=rows)
                      for topic_id, rows in await each_partition(ctx, request, _result)])
