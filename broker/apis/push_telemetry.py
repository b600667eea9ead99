"""PushTelemetry (key 72, KIP-714): a client pushes its subscribed metrics, OTLP MetricsData, compressed
with one of the accepted types; kcoord's receiver keeps them (broker/client_telemetry.py).

Versions (we serve 0, as Kafka 4.2 does):
  v0: flexible from the start; ClientInstanceId, SubscriptionId, Terminating, CompressionType, Metrics
Errors as ClientMetricsManager.processPushTelemetryRequest / validatePushRequest: INVALID_REQUEST (reserved
instance id; a push after a terminating one), THROTTLING_QUOTA_EXCEEDED (before the push interval, unless
terminating), UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE (over
telemetry.max.bytes), INVALID_RECORD (the receiver could not decode the payload).
"""
from __future__ import annotations

from kcoord.broker.apis.get_telemetry_subscriptions import client_info
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m

KEY = 72


@api(key=KEY, name="PushTelemetry", min_version=0, max_version=0)
def handle(ctx: RequestContext, request: m.PushTelemetryRequest):
    error = ctx.broker.client_telemetry.push(
        request.client_instance_id, request.subscription_id, request.terminating, request.compression_type,
        bytes(request.metrics or b""), client_info(ctx))
    return m.PushTelemetryResponse(throttle_time_ms=0, error_code=error)
