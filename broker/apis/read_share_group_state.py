"""ReadShareGroupState (api key 84, v0): a share-partition's state for its (new) leader, which reads it
before serving (SharePartition.maybeInitialize through the persister). ShareCoordinatorShard.readState: a
share-partition with no state answers StartOffset -1, StateEpoch 0; a LeaderEpoch older than the recorded
one is FENCED_LEADER_EPOCH, a newer one is recorded before the answer (readStateAndMaybeUpdateLeaderEpoch).

Versions:
  v0: Partition, LeaderEpoch in; StateEpoch, StartOffset, StateBatches out (flexible)
"""
from __future__ import annotations

from kcoord.broker.apis.share_state_common import partition_error, request_error, share_coordinator
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=84, name="ReadShareGroupState", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.ReadShareGroupStateRequest):
    R = m.ReadShareGroupStateResponse
    service, failed = share_coordinator(ctx), request_error(ctx, request.group_id)
    results = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            answer, state = failed or partition_error(p.partition), None
            if answer is None and service is not None:
                error, message, state = await service.read((request.group_id, t.topic_id, p.partition),
                                                           p.leader_epoch)
                answer = error, message
            assert answer is not None
            ok = answer[0] == ErrorCode.NONE and state is not None
            partitions.append(R.PartitionResult(
                partition=p.partition, error_code=answer[0], error_message=answer[1],
                state_epoch=state.state_epoch if ok and state else 0,
                start_offset=state.start_offset if ok and state else -1,
                state_batches=[R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                            delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                               for b in (state.state_batches() if ok and state else ())]))
        results.append(R.ReadStateResult(topic_id=t.topic_id, partitions=partitions))
    return R(results=results)
