"""DescribeCluster (key 60): cluster id, controller and brokers, for admin clients (KIP-700).

Versions (we serve 0-2):
  v0: flexible from the start; cluster id, controller id, brokers
  v1: endpoint_type (1 = brokers, 2 = controllers; this node is both)
  v2: include_fenced_brokers; is_fenced per broker (KIP-1073; this node is never fenced)
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=60, name="DescribeCluster", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: m.DescribeClusterRequest):
    broker = ctx.broker
    endpoint = broker.endpoint_for(ctx.listener)
    R = m.DescribeClusterResponse
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             endpoint_type=request.endpoint_type if ctx.api_version >= 1 else 1,
             cluster_id=broker.cluster_id, controller_id=broker.node_id,
             brokers=[R.DescribeClusterBroker(broker_id=broker.node_id, host=endpoint.host,
                                              port=endpoint.port, rack=None, is_fenced=False)])
