"""ApiVersions (key 18): which APIs and versions this broker serves, built from the registry.

Versions:
  v0: error code + [api key, min, max]
  v1: throttle_time_ms
  v2: same as v1
  v3: flexible (tagged fields, request header v2); client_software_name/version; tagged SupportedFeatures
      (min/max per feature), FinalizedFeaturesEpoch, FinalizedFeatures (level as both min and max level),
      ZkMigrationReady (always false) -- from metadata/features.py. At v3 a supported feature whose
      minimum is 0 is left out (KAFKA-17492: older clients cannot read it; Kafka's ApiVersionsResponse
      maybeFilterSupportedFeatureKeys with alterFeatureLevel0 = request version < 4)
  v4: same as v3, every supported feature listed (KAFKA-17011); the version kafka-python 3 sends first
GetTelemetrySubscriptions / PushTelemetry (KIP-714) are listed only while the client telemetry receiver is on
(broker/client_telemetry.py), as Kafka lists them only with a ClientTelemetry receiver configured
(ApiVersionManager.apiVersionResponse: clientTelemetryEnabled). v3+ requests' client software name and
version are kept on the connection (telemetry subscriptions match on them).
A version above 4 is answered with UNSUPPORTED_VERSION and a v0 body listing our ApiVersions range
(KIP-511), so a client probing with a newer version falls back; the response header is always v0.
"""
from __future__ import annotations

from kcoord.broker import registry
from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

KEY = 18
TELEMETRY_KEYS = frozenset((71, 72))


@api(key=KEY, name="ApiVersions", min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: m.ApiVersionsRequest):
    served = registry.served()
    if request is None:  # a version we do not serve: tell the client our ApiVersions range only
        own = registry.lookup(KEY)
        return m.ApiVersionsResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[_entry(own)])
    R = m.ApiVersionsResponse
    if ctx.api_version >= 3:
        ctx.session.client_software = (request.client_software_name, request.client_software_version)
    if not ctx.broker.client_telemetry.enabled:
        served = [s for s in served if s.key not in TELEMETRY_KEYS]
    features = ctx.broker.features
    supported = [R.SupportedFeatureKey(name=name, min_version=low, max_version=high)
                 for name, (low, high) in sorted(features.supported().items())
                 if not (ctx.api_version < 4 and low == 0)]
    finalized = [R.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                 for name, level in sorted(features.finalized().items())]
    return R(error_code=ErrorCode.NONE, api_keys=[_entry(s) for s in served], throttle_time_ms=0,
             supported_features=supported, finalized_features_epoch=features.epoch,
             finalized_features=finalized, zk_migration_ready=False)


def _entry(spec: registry.ApiSpec):
    return m.ApiVersionsResponse.ApiVersion(api_key=spec.key, min_version=spec.advertised_min,
                                            max_version=spec.max_version)
