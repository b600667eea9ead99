"""DeleteShareGroupState (api key 86, v0): a share-partition's state goes (a tombstone of its snapshot
key: ShareCoordinatorShard.deleteState), as DeleteShareGroupOffsets and DeleteGroups ask; deleting what
has no state succeeds.

Versions:
  v0: GroupId, Topics / Partitions (flexible)
"""
from __future__ import annotations

from kcoord.broker.apis.share_state_common import Answer, ShareCoordinator, each_partition
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.share.coordinator import ShareKey
from kcoord.protocol import messages as m

R = m.DeleteShareGroupStateResponse


async def _result(coordinator: ShareCoordinator, key: ShareKey, p, error: Answer | None) -> R.PartitionResult:
    code, message = error or await coordinator.delete(key)
    return R.PartitionResult(partition=p.partition, error_code=code, error_message=message)


@api(key=86, name="DeleteShareGroupState", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.DeleteShareGroupStateRequest):
    return R(results=[R.DeleteStateResult(topic_id=topic_id, partitions=rows)
                      for topic_id, rows in await each_partition(ctx, request, _result)])
