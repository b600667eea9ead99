"""UpdateFeatures (key 57): change finalized feature levels (KIP-584), durably (metadata/features.py).

Versions (we serve 0-2, as Kafka 4.2 does):
  v0: flexible from the start; timeout_ms, [feature, max_version_level, allow_downgrade]; per-feature results
  v1: upgrade_type (1 upgrade, 2 safe downgrade, 3 unsafe downgrade) replaces allow_downgrade (true = safe
      downgrade: UpdateFeaturesRequest.getFeature); validate_only
  v2: no per-feature results, the top-level error only
Kafka's controller answers all or nothing (QuorumController.updateFeatures, FeatureControlManager.updateFeatures):
the first refused update refuses the request with INVALID_UPDATE_VERSION at the top level and no results;
a request that passes gets one NONE result per feature at v0-1. ALTER on the cluster is required
(ControllerApis.handleUpdateFeatures: CLUSTER_AUTHORIZATION_FAILED). Cluster mode: through any node, into the
metadata store that every node follows (kcoord.broker.cluster_features); REQUEST_TIMED_OUT if it does not answer.
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import cluster_allowed
from kcoord.metadata.features import FeatureUpdate, UpdateResult, UpgradeType
from kcoord.metadata.store import StoreError
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=57, name="UpdateFeatures", min_version=0, max_version=2)
async def handle(ctx: RequestContext, request: m.UpdateFeaturesRequest):
    R = m.UpdateFeaturesResponse
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                 results=[])
    updates = [FeatureUpdate(u.feature, u.max_version_level, _upgrade_type(ctx.api_version, u))
               for u in request.feature_updates]
    validate_only = ctx.api_version >= 1 and request.validate_only
    cluster = ctx.broker.cluster_features
    if cluster is None:
        result = ctx.broker.features.update(updates, validate_only)
    else:
        try:
            result = await cluster.update(updates, validate_only)
        except StoreError as exc:
            result = UpdateResult(ErrorCode.REQUEST_TIMED_OUT, f"The cluster metadata store did not answer: {exc}")
    results = []
    if result.error == ErrorCode.NONE and ctx.api_version <= 1:
        results = [R.UpdatableFeatureResult(feature=u.name, error_code=ErrorCode.NONE, error_message=None)
                   for u in updates]
    return R(throttle_time_ms=0, error_code=result.error, error_message=result.message, results=results)


def _upgrade_type(version: int, update) -> UpgradeType:
    if version == 0:
        return UpgradeType.SAFE_DOWNGRADE if update.allow_downgrade else UpgradeType.UPGRADE
    return UpgradeType.of(update.upgrade_type)
