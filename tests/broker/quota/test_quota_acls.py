"""Quotas and client-metrics subscriptions under an authorizer, over SASL: ALTER_CONFIGS / DESCRIBE_CONFIGS on
the cluster are required (KafkaApis.handleDescribeClientQuotasRequest, ControllerApis.handleAlterClientQuotas,
ConfigAdminManager for a CLIENT_METRICS resource), and a user entity's quota applies to that SASL principal
(DefaultQuotaCallback: the session's user)."""
from __future__ import annotations

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.security.conftest import PLAIN_JAAS, secure_server
from tests.security.raw import plain_login, raw

CAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = secure_server(tmp_path_factory.mktemp("quota-acl"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"}, name="quota-acl")
    srv.start()
    yield srv
    srv.stop()


def login(server, user: str):
    c = raw(server.address("SASL_PLAINTEXT"))
    assert plain_login(c, user, f"{user}-secret").error_code == ErrorCode.NONE
    return c


def alter(c, user: str, key: str, value: float):
    R = m.AlterClientQuotasRequest
    return c.request(49, 1, R(validate_only=False, entries=[R.EntryData(
        entity=[R.EntityData(entity_type="user", entity_name=user)],
        ops=[R.OpData(key=key, value=value, remove=False)])]))


def test_quotas_and_client_metrics_need_cluster_acls(server):
    alice = login(server, "alice")
    assert [e.error_code for e in alter(alice, "alice", "producer_byte_rate", 1e9).entries] == [CAF]
    R = m.DescribeClientQuotasRequest
    assert alice.request(48, 1, R(components=[], strict=False)).error_code == CAF
    res = m.IncrementalAlterConfigsRequest.AlterConfigsResource
    iac = alice.request(44, 1, m.IncrementalAlterConfigsRequest(validate_only=False, resources=[res(
        resource_type=16, resource_name="all", configs=[res.AlterableConfig(name="metrics", config_operation=0,
                                                                            value="*")])]))
    assert [r.error_code for r in iac.responses] == [CAF]
    admin = login(server, "admin")
    assert [e.error_code for e in alter(admin, "alice", "producer_byte_rate", 1e9).entries] == [0]
    assert [[(e.entity_type, e.entity_name) for e in entry.entity]
            for entry in admin.request(48, 1, R(components=[], strict=False)).entries] == [[("user", "alice")]]


def test_a_user_quota_applies_to_that_principal_only(server):
    admin = login(server, "admin")
    assert [e.error_code for e in alter(admin, "alice", "request_percentage", 0.001).entries] == [0]
    alice = login(server, "alice")
    md = m.MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    assert max(alice.request(3, 12, md).throttle_time_ms for _ in range(3)) > 0
    assert [admin.request(3, 12, md).throttle_time_ms for _ in range(3)] == [0, 0, 0]
