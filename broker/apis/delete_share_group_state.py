"""DeleteShareGroupState (api key 86, v0): a share-partition's state goes (a tombstone of its snapshot
key: ShareCoordinatorShard.deleteState), as DeleteShareGroupOffsets and DeleteGroups ask; deleting what
has no state succeeds.

Versions:
  v0: GroupId, Topics / Partitions (flexible)
"""
from __future__ import annotations

from kcoord.broker.apis.share_state_common import partition_error, request_error, share_coordinator
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m


@api(key=86, name="DeleteShareGroupState", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.DeleteShareGroupStateRequest):
    R = m.DeleteShareGroupStateResponse
    service, failed = share_coordinator(ctx), request_error(ctx, request.group_id)
    results = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            answer = failed or partition_error(p.partition)
            if answer is None and service is not None:
                answer = await service.delete((request.group_id, t.topic_id, p.partition))
            assert answer is not None
            partitions.append(R.PartitionResult(partition=p.partition, error_code=answer[0], error_message=answer[1]))
        results.append(R.DeleteStateResult(topic_id=t.topic_id, partitions=partitions))
    return R(results=results)
