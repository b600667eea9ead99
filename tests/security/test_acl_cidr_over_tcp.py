"""CIDR host patterns in ACLs (KIP-1276) over TCP with kafka-python: the super user creates bindings whose
hosts are CIDR blocks through KafkaAdminClient; a SASL user connecting from 127.0.0.1 may produce to the
topic allowed from 127.0.0.0/8 and is refused the topic allowed only from 10.0.0.0/8
(TOPIC_AUTHORIZATION_FAILED), as StandardAuthorizerData.findResult matches the client address against
the block; a host with "/" that is no block is refused with INVALID_REQUEST (AclControlManager
.validateHostPattern); DescribeAcls finds a CIDR binding by its literal host only
(AccessControlEntryFilter.matches)."""
from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import InvalidRequestError, TopicAuthorizationFailedError

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.security.conftest import PLAIN_JAAS, secure_server
from tests.security.raw import plain_login, raw

LISTENER = "SASL_PLAINTEXT"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = secure_server(tmp_path_factory.mktemp("cidr"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"}, name="cidr")
    srv.start()
    yield srv
    srv.stop()


def client_settings(username: str, password: str) -> dict:
    return {"security_protocol": LISTENER, "sasl_mechanism": "PLAIN", "sasl_plain_username": username,
            "sasl_plain_password": password}


def write_from(host: str, topic: str) -> ACL:
    return ACL(principal="User:alice", host=host, operation=ACLOperation.WRITE,
               permission_type=ACLPermissionType.ALLOW,
               resource_pattern=ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL))


def admin_client(server) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=server.address(LISTENER), **client_settings("admin", "admin-secret"))


@pytest.fixture(scope="module")
def bindings(server):
    """Topics from-loopback (alice may WRITE from 127.0.0.0/8) and from-ten (only from 10.0.0.0/8)."""
    a = admin_client(server)
    try:
        a.create_topics([NewTopic("from-loopback", 1, 1), NewTopic("from-ten", 1, 1)])
        created = a.create_acls([write_from("127.0.0.0/8", "from-loopback"), write_from("10.0.0.0/8", "from-ten")])
        assert not created["failed"], created
    finally:
        a.close()
    return server


@pytest.fixture
def admin(bindings):
    a = admin_client(bindings)
    yield a
    a.close()


def test_a_block_holding_the_client_lets_it_in_and_another_does_not(bindings):
    producer = KafkaProducer(bootstrap_servers=bindings.address(LISTENER), max_block_ms=10_000,
                             **client_settings("alice", "alice-secret"))
    try:
        meta = producer.send("from-loopback", b"inside 127.0.0.0/8").get(timeout=30)
        assert meta.topic == "from-loopback" and meta.offset == 0
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("from-ten", b"not from 10.0.0.0/8").get(timeout=30)
    finally:
        producer.close()


def test_a_host_with_a_slash_that_is_no_block_is_an_invalid_request(admin):
    result = admin.create_acls([write_from("10.0.0.0/33", "from-ten"), write_from("2001:db8::/32", "from-ten")])
    assert [acl.host for acl in result["succeeded"]] == ["2001:db8::/32"]
    assert result["failed"] == [InvalidRequestError]  # kafka-python lists the error class per failed ACL


def test_the_refusal_says_why_at_the_wire(bindings):
    with raw(bindings.address(LISTENER)) as c:
        assert plain_login(c, "admin", "admin-secret").error_code == ErrorCode.NONE
        R = m.CreateAclsRequest
        resp = c.request(30, 3, R(creations=[R.AclCreation(
            resource_type=2, resource_name="from-ten", resource_pattern_type=3, principal="User:alice",
            host="10.0.0.0/255.0.0.0", operation=4, permission_type=3)]))
    [result] = resp.results
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert result.error_message.startswith("Invalid CIDR notation '10.0.0.0/255.0.0.0'")


def test_describe_acls_matches_the_host_literally(admin):
    def hosts(host):
        acls, _error = admin.describe_acls(ACLFilter(
            principal="User:alice", host=host, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY)))
        return sorted(acl.host for acl in acls)

    assert "127.0.0.0/8" in hosts(None)
    assert hosts("127.0.0.0/8") == ["127.0.0.0/8"]
    assert hosts("127.0.0.1") == [], "an address inside the block does not find it"
