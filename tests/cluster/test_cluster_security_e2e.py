"""ACLs and SCRAM credentials are the cluster's (issue #26): 3 real nodes on a real etcd, each with a
PLAINTEXT listener (replication, the admin client) and a SASL_PLAINTEXT one (SCRAM), the StandardAuthorizer
on. A credential made through one node authenticates on every node, and its deletion is seen by all; an
ACL created through one node is enforced by the partition's leader wherever it is, listed by every node,
and still enforced by a node restarted on its data (nothing of it is in that node's log.dirs).

Kafka: ScramPublisher.onMetadataUpdate / AclPublisher.onMetadataUpdate (core/src/main/scala/kafka/server/
metadata/ScramPublisher.scala, AclPublisher.scala) make every broker follow the UserScramCredentialRecord
and AccessControlEntryRecord of the metadata log; here every node follows `acls/` and `scram/` in the
metadata store (kcoord.broker.security.cluster_security)."""
from __future__ import annotations

import hashlib
import os
import re

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import build_batch
from tests.cluster.replication_checks import wait_until
from tests.security.raw import ScramClient, authenticate, handshake, raw, scram_login

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.kcoord_cluster(
    nodes=3, session_timeout_ms=2000, overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # PLAINTEXT (replication, the harness, the admin client) is User:ANONYMOUS: the brokers' principal
        "super.users": "User:ANONYMOUS", "allow.everyone.if.no.acl.found": "true"})]

_READY = re.compile(r"kcoord ready: listening on ([^;\n]+)")


def sasl_address(node) -> str:
    """The node's SASL_PLAINTEXT listener as bound (the second of its ready line)."""
    return _READY.findall(node.log_text())[-1].split(", ")[1].strip()


def login(node, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> ErrorCode:
    """The SCRAM exchange's outcome (an unknown user fails at the first round, a wrong password at the last)."""
    client = raw(sasl_address(node))
    try:
        assert handshake(client, mechanism).error_code == ErrorCode.NONE
        scram = ScramClient(mechanism, user, password)
        first = authenticate(client, scram.first())
        if first.error_code != ErrorCode.NONE:
            return ErrorCode(first.error_code)
        return ErrorCode(authenticate(client, scram.final(first.auth_bytes)).error_code)
    finally:
        client.close()


def admin_via(cluster, node_id: int):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.nodes[node_id].bootstrap_servers, request_timeout_ms=10_000)


def test_a_user_created_through_one_node_authenticates_on_every_node(kafka_cluster):
    """AlterUserScramCredentials through node 1; SCRAM-SHA-512 logins on nodes 1, 2 and 3 succeed (node 1
    at once: it answers after its own copy has the change), a wrong password fails; a kafka-python
    producer authenticated on node 3's listener writes; the user deleted through node 2 can log in nowhere."""
    from kafka import KafkaProducer
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion

    cluster = kafka_cluster
    # Raw, to node 1 itself: kafka-python's admin sends it to its least loaded broker, any of the three
    R = m.AlterUserScramCredentialsRequest
    upserts = []
    for mechanism, digest in ((ScramMechanism.SCRAM_SHA_512, "sha512"), (ScramMechanism.SCRAM_SHA_256, "sha256")):
        salt = os.urandom(16)
        upserts.append(R.ScramCredentialUpsertion(
            name="dave", mechanism=int(mechanism), iterations=4096, salt=salt,
            salted_password=hashlib.pbkdf2_hmac(digest, b"dave-secret", salt, 4096)))
    client = raw(cluster.nodes[1].bootstrap_servers)
    try:
        altered = client.request(51, 0, R(deletions=[], upsertions=upserts))
    finally:
        client.close()
    assert [(r.user, r.error_code) for r in altered.results] == [("dave", ErrorCode.NONE)]
    assert login(cluster.nodes[1], "dave", "dave-secret") is ErrorCode.NONE
    for node_id in (2, 3):
        wait_until(lambda n=node_id: login(cluster.nodes[n], "dave", "dave-secret") is ErrorCode.NONE, 10,
                   f"dave logging in on node {node_id}")
        assert login(cluster.nodes[node_id], "dave", "dave-secret", "SCRAM-SHA-256") is ErrorCode.NONE
        assert login(cluster.nodes[node_id], "dave", "wrong") is ErrorCode.SASL_AUTHENTICATION_FAILED

    producer = KafkaProducer(bootstrap_servers=sasl_address(cluster.nodes[3]), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="dave",
                             sasl_plain_password="dave-secret", acks="all", request_timeout_ms=10_000)
    try:
        metadata = producer.send("dave-writes", b"hello").get(timeout=30)
    finally:
        producer.close(timeout=10)
    assert metadata.offset == 0

    admin = admin_via(cluster, 2)
    try:
        assert admin.alter_user_scram_credentials([
            UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512),
            UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)]) == {"dave": None}
    finally:
        admin.close()
    for node_id in (2, 1, 3):
        wait_until(lambda n=node_id: login(cluster.nodes[n], "dave", "dave-secret")
                   is ErrorCode.SASL_AUTHENTICATION_FAILED, 10, f"dave refused on node {node_id}")


def _produce(address: str, user: str, password: str, topic: str) -> ErrorCode:
    client = raw(address)
    try:
        assert scram_login(client, "SCRAM-SHA-512", user, password).error_code == ErrorCode.NONE
        R = m.ProduceRequest
        response = client.request(0, 9, R(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
            R.TopicProduceData(name=topic, partition_data=[
                R.PartitionProduceData(index=0, records=build_batch([(None, b"x")]))])]))
        return ErrorCode(response.responses[0].partition_responses[0].error_code)
    finally:
        client.close()


def test_an_acl_created_through_one_node_is_enforced_on_all(kafka_cluster):
    """A DENY WRITE for User:erin on `guarded` created through node 1 (CreateAcls): erin's produce to the
    partition's leader, on whichever node, is TOPIC_AUTHORIZATION_FAILED while her produce to another
    topic succeeds; DescribeAcls through every node lists the binding; the leader restarted on its data
    (SIGKILL) still refuses; DeleteAcls through node 3 lifts it everywhere."""
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        NewTopic,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    from kafka.admin import ACLResourcePatternType as Pattern

    cluster = kafka_cluster
    admin = admin_via(cluster, 1)
    deny = ACL(principal="User:erin", host="*", operation=ACLOperation.WRITE, permission_type=ACLPermissionType.DENY,
               resource_pattern=ResourcePattern(ResourceType.TOPIC, "guarded", Pattern.LITERAL))
    try:
        assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "erin", ScramMechanism.SCRAM_SHA_512, "erin-secret", iterations=4096)]) == {"erin": None}
        admin.create_topics([NewTopic("guarded", 1, 3), NewTopic("open", 1, 3)])
        result = admin.create_acls([deny])
        assert not result["failed"], result
    finally:
        admin.close()
    for topic in ("guarded", "open"):
        cluster.wait_isr(topic, 0, 3)
    leader = cluster.wait_leader("guarded", 0)
    open_leader = cluster.wait_leader("open", 0)

    def refused_by(node_id: int) -> bool:
        return _produce(sasl_address(cluster.nodes[node_id]), "erin", "erin-secret", "guarded") \
            is ErrorCode.TOPIC_AUTHORIZATION_FAILED

    wait_until(lambda: refused_by(leader), 10, f"node {leader} refusing erin's write")
    assert _produce(sasl_address(cluster.nodes[open_leader]), "erin", "erin-secret", "open") is ErrorCode.NONE

    acl_filter = ACLFilter(principal="User:erin", host=None, operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, Pattern.ANY))

    def erins_acls(node_id: int) -> list[tuple]:
        """DescribeAcls sent to the node itself (kafka-python's admin picks its least loaded broker)."""
        client = raw(cluster.nodes[node_id].bootstrap_servers)
        try:
            response = client.request(29, 3, m.DescribeAclsRequest(
                resource_type_filter=int(ResourceType.ANY), resource_name_filter=None,
                pattern_type_filter=int(Pattern.ANY), principal_filter="User:erin", host_filter=None,
                operation=int(ACLOperation.ANY), permission_type=int(ACLPermissionType.ANY)))
        finally:
            client.close()
        assert response.error_code == ErrorCode.NONE
        return [(acl.principal, acl.operation, acl.permission_type, resource.resource_name)
                for resource in response.resources for acl in resource.acls]

    for node_id in (1, 2, 3):
        listed = wait_until(lambda n=node_id: erins_acls(n), 10, f"the ACL on node {node_id}")
        assert listed == [("User:erin", int(ACLOperation.WRITE), int(ACLPermissionType.DENY), "guarded")]

    cluster.kill(leader)
    cluster.restart(leader)
    cluster.wait_isr("guarded", 0, 3)
    assert (cluster.data_dir(leader) / "kcoord-acls.json").exists() is False
    now_leader = cluster.wait_leader("guarded", 0)
    wait_until(lambda: refused_by(now_leader), 10, f"node {now_leader} refusing erin's write after the restart")
    cluster.wait_leader("guarded", 0)

    admin = admin_via(cluster, 3)
    try:
        result = admin.delete_acls([acl_filter])
    finally:
        admin.close()
    assert [len(matched) for _flt, matched, _err in result] == [1], result
    wait_until(lambda: _produce(sasl_address(cluster.nodes[cluster.wait_leader("guarded", 0)]), "erin",
                                "erin-secret", "guarded") is ErrorCode.NONE, 10, "erin's write allowed again")
