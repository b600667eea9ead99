"""DescribeProducers (key 61): the producers a partition knows -- epoch, last sequence and timestamp, and
the first offset of an open transaction (KIP-664; Kafka's ReplicaManager.activeProducerState).

Versions (we serve 0):
  v0: flexible
A partition we do not have answers UNKNOWN_TOPIC_OR_PARTITION. The coordinator epoch of a producer's last
marker is not tracked per producer: -1.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

R = m.DescribeProducersResponse
T = R.TopicResponse
P = T.PartitionResponse


@api(key=61, name="DescribeProducers", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.DescribeProducersRequest):
    return R(throttle_time_ms=0, topics=[T(name=t.name, partitions=[_partition(ctx.broker, t.name, p)
                                                                    for p in t.partition_indexes])
                                         for t in request.topics])


def _partition(broker, topic: str, index: int):
    plog = broker.topics.log(topic, index)
    if plog is None:
        return P(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                 error_message="This server does not host this topic-partition.", active_producers=[])
    txns = broker.txn_index.state(plog)
    active = [P.ProducerState(producer_id=pid, producer_epoch=epoch, last_sequence=seq, last_timestamp=ts,
                              coordinator_epoch=broker.producers.coordinator_epoch_of((topic, index), plog, pid),
                              current_txn_start_offset=txns.ongoing.get(pid, -1))
              for pid, epoch, seq, ts in broker.producers.active_producers((topic, index), plog)]
    return P(partition_index=index, error_code=ErrorCode.NONE, error_message=None, active_producers=active)
