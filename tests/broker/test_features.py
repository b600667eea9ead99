"""Feature versions (KIP-584), UpdateFeatures (57), ListConfigResources (74) and the error codes 129-133,
over TCP against a real kcoord, with kafka-python 3.0.12's admin calls and at the wire.

Kafka 4.2 sources followed:
- ApiVersions v3+ features: clients/.../requests/ApiVersionsResponse.java (maybeFilterSupportedFeatureKeys:
  a supported feature with minimum 0 is left out below v4, KAFKA-17492; createFinalizedFeatureKeys: a
  finalized level is both min and max level, level 0 left out); server/.../BrokerFeatures.java
  (defaultSupportedFeatures: a feature whose highest level is 0 is not listed).
- UpdateFeatures: metadata/.../controller/FeatureControlManager.java (updateFeatures / updateFeature: the
  INVALID_UPDATE_VERSION refusals), controller/QuorumController.java (updateFeatures: all or nothing,
  per-feature results only at v0-1), clients/.../requests/UpdateFeaturesRequest.java (getFeature: v0's
  AllowDowngrade is SAFE_DOWNGRADE).
- group.version 0: core/.../server/KafkaApis.scala (isConsumerGroupProtocolEnabled; ConsumerGroupHeartbeat
  and ConsumerGroupDescribe answer UNSUPPORTED_VERSION); share.version 0 likewise (isShareGroupProtocolEnabled)
  for the share-group APIs; server-common's ShareVersion (SV_1 bootstraps from IBP_4_2_IV0: on by default).
- ListConfigResources: clients/.../requests/ListConfigResourcesRequest.java (supportedResourceTypes: v0
  CLIENT_METRICS, v1 TOPIC/BROKER/BROKER_LOGGER/CLIENT_METRICS/GROUP); KafkaApis (DESCRIBE_CONFIGS on the
  cluster, UNSUPPORTED_VERSION for a type outside the version's set).
- Error codes: clients/.../protocol/Errors.java (129 REBOOTSTRAP_REQUIRED ... 133 SHARE_SESSION_LIMIT_REACHED).
"""
from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.support.raw_kafka import RawKafka

UF = m.UpdateFeaturesRequest
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def call(c: RawKafka, key: int, version: int, body):
    from tests.broker.test_every_advertised_version import call as wire_call
    return wire_call(c, key, version, body)


def api_versions(port: int, version: int = 4):
    with RawKafka(port) as c:
        return call(c, 18, version, m.ApiVersionsRequest(client_software_name="t", client_software_version="1"))


def update(port: int, version: int, *updates, validate_only=False):
    """UpdateFeatures with (feature, level, upgrade type) updates."""
    keys = [UF.FeatureUpdateKey(feature=f, max_version_level=level, allow_downgrade=kind != UPGRADE,
                                upgrade_type=kind) for f, level, kind in updates]
    with RawKafka(port) as c:
        return call(c, 57, version, UF(timeout_ms=1000, feature_updates=keys, validate_only=validate_only))


def features(resp):
    return ({f.name: (f.min_version, f.max_version) for f in resp.supported_features},
            {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features},
            resp.finalized_features_epoch)


# -- error codes ---------------------------------------------------------------------------------------
def test_error_codes_129_to_133_have_kafkas_names_and_retriable_flags():
    want = {129: ("REBOOTSTRAP_REQUIRED", False), 130: ("STREAMS_INVALID_TOPOLOGY", False),
            131: ("STREAMS_INVALID_TOPOLOGY_EPOCH", False), 132: ("STREAMS_TOPOLOGY_FENCED", False),
            133: ("SHARE_SESSION_LIMIT_REACHED", True)}
    assert {c: (ErrorCode(c).name, ErrorCode(c).retriable) for c in want} == want
    assert max(ErrorCode) == 133  # Errors.java ends at 133 through Kafka 4.3.1


# -- ApiVersions ----------------------------------------------------------------------------------------
def test_api_versions_v4_reports_kcoords_features(kcoord_server):
    supported, finalized, epoch = features(api_versions(kcoord_server.port, 4))
    assert supported == {"metadata.version": (29, 30), "group.version": (0, 1), "transaction.version": (0, 2),
                         "share.version": (0, 1)}
    assert finalized == {"metadata.version": (30, 30), "group.version": (1, 1), "transaction.version": (2, 2),
                         "share.version": (1, 1)}
    assert epoch == 0


def test_api_versions_v3_leaves_out_supported_features_with_minimum_0(kcoord_server):
    supported, finalized, _ = features(api_versions(kcoord_server.port, 3))
    assert supported == {"metadata.version": (29, 30)}  # KAFKA-17492
    assert finalized == {"metadata.version": (30, 30), "group.version": (1, 1), "transaction.version": (2, 2),
                         "share.version": (1, 1)}


def test_kafka_python_describe_features(kcoord_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap)
    try:
        got = admin.describe_features()
        assert got == {"metadata.version": {"supported": (29, 30), "finalized": (30, 30), "finalized_epoch": 0},
                       "group.version": {"supported": (0, 1), "finalized": (1, 1), "finalized_epoch": 0},
                       "transaction.version": {"supported": (0, 2), "finalized": (2, 2), "finalized_epoch": 0},
                       "share.version": {"supported": (0, 1), "finalized": (1, 1), "finalized_epoch": 0}}
        # DescribeCluster names the controller that update_features is sent to: this node
        assert admin.describe_cluster()["controller_id"] == 1
        assert admin.update_features({"group.version": ("SAFE_DOWNGRADE", 0)}) == {"group.version": "OK"}
        assert "group.version" not in {k for k, v in admin.describe_features().items() if "finalized" in v}
        assert admin.update_features({"group.version": 1}) == {"group.version": "OK"}
        assert admin.describe_features()["group.version"]["finalized"] == (1, 1)
        assert admin.describe_features()["group.version"]["finalized_epoch"] == 2
        with pytest.raises(InvalidUpdateVersionError):
            admin.update_features({"transaction.version": 3})
    finally:
        admin.close()


# -- UpdateFeatures -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1, 2])
def test_update_features_refusals_refuse_the_whole_request(kcoord_server, version):
    port = kcoord_server.port
    cases = [
        (("transaction.version", 3, UPGRADE), "only supports versions 0-2"),
        (("share.version", 2, UPGRADE), "only supports versions 0-1"),
        (("metadata.version", 28, SAFE_DOWNGRADE), "only supports versions 29-30"),
        (("metadata.version", 31, UPGRADE), "only supports versions 29-30"),
        # 4.3-IV0 changed the metadata format: no way back (FeatureControlManager.updateMetadataVersion)
        (("metadata.version", 29, SAFE_DOWNGRADE), "Refusing to perform the requested downgrade because it "
                                                  "might delete metadata information."),
        (("group.version", 2, UPGRADE), "only supports versions 0-1"),
        (("group.version", -1, SAFE_DOWNGRADE), "cannot be below 0"),
    ]
    if version >= 1:
        cases += [(("metadata.version", 29, UNSAFE_DOWNGRADE), "Unsafe metadata downgrade is not supported in "
                                                               "this version."),
                  (("group.version", 0, UPGRADE), "SAFE_DOWNGRADE or UNSAFE_DOWNGRADE"),  # downgrade as upgrade
                  (("group.version", 1, 9), "upgrade type")]                             # UNKNOWN type
    else:
        cases += [(("group.version", 0, UPGRADE), "SAFE_DOWNGRADE or UNSAFE_DOWNGRADE")]  # AllowDowngrade false
    for bad, reason in cases:
        # a valid update first: it is not applied either (FeatureControlManager: all or nothing)
        resp = update(port, version, ("group.version", 0, SAFE_DOWNGRADE), bad)
        assert resp.error_code == ErrorCode.INVALID_UPDATE_VERSION, bad
        assert reason in resp.error_message and resp.error_message.startswith("The update failed for all features")
        assert resp.results == []
    _, finalized, epoch = features(api_versions(port))
    assert finalized["group.version"] == (1, 1) and epoch == 0


def test_update_features_downgrade_upgrade_validate_only_and_results_per_version(kcoord_server):
    port = kcoord_server.port
    resp = update(port, 1, ("group.version", 0, UNSAFE_DOWNGRADE), validate_only=True)
    assert (resp.error_code, [(r.feature, r.error_code) for r in resp.results]) == (0, [("group.version", 0)])
    assert features(api_versions(port))[1:] == ({"metadata.version": (30, 30), "group.version": (1, 1),
                                                 "transaction.version": (2, 2), "share.version": (1, 1)}, 0)
    resp = update(port, 2, ("group.version", 0, SAFE_DOWNGRADE))
    assert (resp.error_code, resp.error_message, resp.results) == (0, None, [])
    assert features(api_versions(port))[1:] == ({"metadata.version": (30, 30), "transaction.version": (2, 2),
                                                 "share.version": (1, 1)}, 1)
    # at group.version 0 the KIP-848 calls answer UNSUPPORTED_VERSION (KafkaApis.isConsumerGroupProtocolEnabled)
    with RawKafka(port) as c:
        hb = call(c, 68, 1, m.ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=1000,
            subscribed_topic_names=["t"], subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]))
        described = call(c, 69, 1, m.ConsumerGroupDescribeRequest(group_ids=["g"], include_authorized_operations=False))
    assert hb.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(g.group_id, g.error_code) for g in described.groups] == [("g", ErrorCode.UNSUPPORTED_VERSION)]
    resp = update(port, 0, ("group.version", 1, UPGRADE), ("metadata.version", 30, UPGRADE))  # 30: no change
    assert (resp.error_code, sorted(r.feature for r in resp.results)) == (0, ["group.version", "metadata.version"])
    assert features(api_versions(port))[1:] == ({"metadata.version": (30, 30), "group.version": (1, 1),
                                                 "transaction.version": (2, 2), "share.version": (1, 1)}, 2)


def test_share_version_0_turns_share_groups_off(kcoord_server_factory):
    """share.version 0: the share-group APIs answer UNSUPPORTED_VERSION (KafkaApis.isShareGroupProtocolEnabled,
    core/src/main/scala/kafka/server/KafkaApis.scala, handleShareGroupHeartbeat / handleShareFetchRequest /
    handleShareGroupDescribe...: getErrorResponse(UNSUPPORTED_VERSION)); back at 1 they serve again."""
    server = kcoord_server_factory()
    port = server.port
    heartbeat = m.ShareGroupHeartbeatRequest(group_id="sg", member_id="share-member-1", member_epoch=0,
                                             rack_id=None, subscribed_topic_names=["t"])
    assert update(port, 2, ("share.version", 0, SAFE_DOWNGRADE)).error_code == 0
    assert "share.version" not in features(api_versions(port))[1]
    with RawKafka(port) as c:
        hb = call(c, 76, 1, heartbeat)
        described = call(c, 77, 1, m.ShareGroupDescribeRequest(group_ids=["sg"], include_authorized_operations=False))
        fetched = call(c, 78, 1, m.ShareFetchRequest(
            group_id="sg", member_id="share-member-1", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
            max_bytes=1024, max_records=1, batch_size=1, topics=[], forgotten_topics_data=[]))
    assert hb.error_code == fetched.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(g.group_id, g.error_code) for g in described.groups] == [("sg", ErrorCode.UNSUPPORTED_VERSION)]
    server.restart()  # the level is durable
    assert update(port := server.port, 0, ("share.version", 1, UPGRADE)).error_code == 0
    with RawKafka(port) as c:
        assert call(c, 76, 1, heartbeat).error_code == ErrorCode.NONE


def test_finalized_levels_survive_a_restart(kcoord_server_factory):
    server = kcoord_server_factory()
    assert update(server.port, 2, ("group.version", 0, SAFE_DOWNGRADE)).error_code == 0
    server.restart()
    assert features(api_versions(server.port))[1:] == ({"metadata.version": (30, 30), "transaction.version": (2, 2),
                                                        "share.version": (1, 1)}, 1)


# -- ListConfigResources ----------------------------------------------------------------------------------
def test_list_config_resources(kcoord_server):
    admin = KafkaAdminClient(bootstrap_servers=kcoord_server.bootstrap)
    try:
        from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
        admin.create_topics([NewTopic("listed", 1, 1)])
        admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, "configured-group",
                                                        configs={"consumer.session.timeout.ms": "50000"})], incremental=True)
        got = admin.list_config_resources()
    finally:
        admin.close()
    assert got["broker"] == ["1"] and got["broker_logger"] == ["1"]
    assert "listed" in got["topic"] and got["group"] == ["configured-group"]
    assert "client_metrics" not in got  # no client telemetry yet: none to list
    port = kcoord_server.port
    with RawKafka(port) as c:
        v0 = call(c, 74, 0, m.ListConfigResourcesRequest())
        only_groups = call(c, 74, 1, m.ListConfigResourcesRequest(resource_types=[32]))
        unknown_type = call(c, 74, 1, m.ListConfigResourcesRequest(resource_types=[2, 1]))
    assert (v0.error_code, v0.config_resources) == (0, [])  # v0 lists CLIENT_METRICS only
    assert [(r.resource_type, r.resource_name) for r in only_groups.config_resources] == [(32, "configured-group")]
    assert (unknown_type.error_code, unknown_type.config_resources) == (ErrorCode.UNSUPPORTED_VERSION, [])
