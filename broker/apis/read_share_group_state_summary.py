"""ReadShareGroupStateSummary (api key 87, v0-1): a share-partition's state epoch, leader epoch and start
offset as recorded, for DescribeShareGroupOffsets (ShareCoordinatorShard.readStateSummary; nothing is
written). No state: StartOffset -1.

Versions:
  v0: StateEpoch, LeaderEpoch, StartOffset (flexible)
  v1: DeliveryCompleteCount (KIP-1226, Kafka 4.2)
"""
from __future__ import annotations

from kcoord.broker.apis.share_state_common import partition_error, request_error, share_coordinator
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=87, name="ReadShareGroupStateSummary", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: m.ReadShareGroupStateSummaryRequest):
    R = m.ReadShareGroupStateSummaryResponse
    service, failed = share_coordinator(ctx), request_error(ctx, request.group_id)
    results = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            answer, state = failed or partition_error(p.partition), None
            if answer is None and service is not None:
                error, state = service.summary((request.group_id, t.topic_id, p.partition))
                answer = error, None
            assert answer is not None
            ok = answer[0] == ErrorCode.NONE and state is not None
            partitions.append(R.PartitionResult(
                partition=p.partition, error_code=answer[0], error_message=answer[1],
                state_epoch=state.state_epoch if ok and state else 0,
                leader_epoch=state.leader_epoch if ok and state else -1,
                start_offset=state.start_offset if ok and state else -1,
                delivery_complete_count=state.delivery_complete_count if ok and state else -1))
        results.append(R.ReadStateSummaryResult(topic_id=t.topic_id, partitions=partitions))
    return R(results=results)
