"""DescribeCluster (key 60): cluster id, controller and brokers, for admin clients (KIP-700).

Versions (we serve 0-2):
  v0: flexible from the start; cluster id, controller id, brokers
  v1: endpoint_type (1 = brokers, 2 = controllers; this node is both)
  v2: include_fenced_brokers; is_fenced per broker (KIP-1073; this node is never fenced)
Cluster mode: every registered broker (with its rack) and the active controller from the node's image;
a broker in controlled shutdown is listed, not fenced (a fenced one has no registration to list).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=60, name="DescribeCluster", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: m.DescribeClusterRequest):
    broker = ctx.broker
    R = m.DescribeClusterResponse
    endpoint_type = request.endpoint_type if ctx.api_version >= 1 else 1
    if broker.cluster is not None:
        cluster = broker.cluster
        brokers = []
        for b in cluster.live_brokers():
            e = next((e for e in b.info.listeners if e.name == ctx.listener), None) or \
                (b.info.listeners[0] if b.info.listeners else None)
            if e is not None:
                brokers.append(R.DescribeClusterBroker(broker_id=b.id, host=e.host, port=e.port,
                                                       rack=b.info.rack, is_fenced=False))
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=endpoint_type,
                 cluster_id=cluster.cluster_id, controller_id=cluster.controller_id, brokers=brokers)
    endpoint = broker.endpoint_for(ctx.listener)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             endpoint_type=endpoint_type,
             cluster_id=broker.cluster_id, controller_id=broker.node_id,
             brokers=[R.DescribeClusterBroker(broker_id=broker.node_id, host=endpoint.host,
                                              port=endpoint.port, rack=None, is_fenced=False)])
