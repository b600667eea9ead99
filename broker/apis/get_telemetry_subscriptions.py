"""GetTelemetrySubscriptions (key 71, KIP-714): a client learns its instance id, which of its metrics the
broker wants, how often, and how it may compress them (broker/client_telemetry.py).

Versions (we serve 0, as Kafka 4.2 does):
  v0: flexible from the start; ClientInstanceId (zero on the first request: the broker assigns one)
Advertised only while the telemetry receiver is on (api_versions.py); served either way, as Kafka's
KafkaApis serves it whenever its ClientMetricsManager exists. Errors: THROTTLING_QUOTA_EXCEEDED when asked
again before the push interval (ClientMetricsManager.validateGetRequest).
"""
from __future__ import annotations

from kcoord.broker.client_telemetry import ACCEPTED_COMPRESSION, ClientInfo
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

KEY = 71


def client_info(ctx: RequestContext) -> ClientInfo:
    name, version = ctx.session.client_software or ("", "")
    return ClientInfo(ctx.client_id or "", name, version, ctx.client_host, ctx.client_port)


@api(key=KEY, name="GetTelemetrySubscriptions", min_version=0, max_version=0)
def handle(ctx: RequestContext, request: m.GetTelemetrySubscriptionsRequest):
    telemetry = ctx.broker.client_telemetry
    answer = telemetry.get_subscriptions(request.client_instance_id, client_info(ctx))
    R = m.GetTelemetrySubscriptionsResponse
    if answer.error != ErrorCode.NONE:
        return R(throttle_time_ms=0, error_code=answer.error, client_instance_id=answer.client_instance_id,
                 subscription_id=0, accepted_compression_types=[], push_interval_ms=0, telemetry_max_bytes=0,
                 delta_temporality=False, requested_metrics=[])
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, client_instance_id=answer.client_instance_id,
             subscription_id=answer.subscription_id, accepted_compression_types=list(ACCEPTED_COMPRESSION),
             push_interval_ms=answer.push_interval_ms, telemetry_max_bytes=telemetry.max_bytes,
             delta_temporality=False, requested_metrics=list(answer.requested_metrics))
