"""OffsetDelete (api key 47): delete a group's committed offsets for some partitions, as long as
the group is not consuming those topics (KIP-496); answered once the tombstones are durable.

Versions:
  v0: GroupId, Topics[Partitions]; top-level and per-partition errors
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m


def _response(request, top_error, error_of) -> m.OffsetDeleteResponse:
    topic_type = m.OffsetDeleteResponse.OffsetDeleteResponseTopic
    partition_type = topic_type.OffsetDeleteResponsePartition
    topics = [] if top_error else [
        topic_type(name=t.name, partitions=[
            partition_type(partition_index=p.partition_index, error_code=error_of(t.name, p.partition_index))
            for p in t.partitions])
        for t in request.topics]
    return m.OffsetDeleteResponse(error_code=top_error, topics=topics)


@api(key=47, name="OffsetDelete", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.OffsetDeleteRequest):
    partitions = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    top_error, errors = await ctx.broker.group_coordinator.delete_offsets(request.group_id, partitions)
    return _response(request, top_error, lambda t, p: errors.get((t, p), 0))
