"""ACLs over TCP: kafka-python's admin client creates, describes and deletes them as a super user; a
principal allowed to read topic T but not group G gets GROUP_AUTHORIZATION_FAILED on JoinGroup,
Heartbeat (the frame fast path must not bypass it) and OffsetCommit for G; DescribeGroups / ListGroups /
Metadata show it only what it may see; prefixed ACLs and deny-over-allow behave as Kafka's. The answers
follow KafkaApis (handleJoinGroupRequest, handleOffsetCommitRequest, handleDescribeGroupsRequest,
handleListGroupsRequest, handleTopicMetadataRequest)."""
from __future__ import annotations

import itertools

import pytest
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

from kcoord.broker.security.acl import AclOperation as Op
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.security.conftest import PLAIN_JAAS, add_scram_users, secure_server
from tests.security.raw import plain_login, raw

GAF, TAF = ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED
_n = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = secure_server(tmp_path_factory.mktemp("acl"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "group.min.session.timeout.ms": "1000"},
        name="acl")
    add_scram_users(srv.data_dir)
    srv.start()
    yield srv
    srv.stop()


def admin(server) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=server.address("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin-secret")


def allow(principal, op, rtype, name, pattern=ACLResourcePatternType.LITERAL, perm=ACLPermissionType.ALLOW):
    return ACL(principal=principal, host="*", operation=op, permission_type=perm,
               resource_pattern=ResourcePattern(rtype, name, pattern))


@pytest.fixture(scope="module")
def world(server):
    """Topics t-read (alice may READ), t-other (no ACL); groups: app-* prefixed READ for alice,
    app-secret denied; g-closed has no ACL."""
    a = admin(server)
    a.create_topics([NewTopic("t-read", 2, 1), NewTopic("t-other", 1, 1)])
    result = a.create_acls([
        allow("User:alice", ACLOperation.READ, ResourceType.TOPIC, "t-read"),
        allow("User:alice", ACLOperation.READ, ResourceType.GROUP, "app-", ACLResourcePatternType.PREFIXED),
        allow("User:alice", ACLOperation.READ, ResourceType.GROUP, "app-secret", perm=ACLPermissionType.DENY),
    ])
    assert not result["failed"], result
    a.close()
    return server


def alice(server):
    c = raw(server.address("SASL_PLAINTEXT"))
    assert plain_login(c, "alice", "alice-secret").error_code == ErrorCode.NONE
    return c


def join(c, group: str):
    R = m.JoinGroupRequest
    req = R(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            group_instance_id=None, protocol_type="consumer",
            protocols=[R.JoinGroupRequestProtocol(name="range", metadata=b"")], reason=None)
    resp = c.request(11, 5, req)
    if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        req.member_id = resp.member_id
        resp = c.request(11, 5, req)
    return resp


def commit(c, group: str, topic: str, version: int = 8):
    R = m.OffsetCommitRequest
    resp = c.request(8, version, R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, retention_time_ms=-1, topics=[R.OffsetCommitRequestTopic(
                                       name=topic, partitions=[R.OffsetCommitRequestPartition(
                                           partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                           committed_metadata="")])]))
    return {t.name: t.partitions[0].error_code for t in resp.topics}


def test_acl_admin_round_trip_with_kafka_python(world):
    a = admin(world)
    acls, error = a.describe_acls(ACLFilter(principal="User:alice", host=None, operation=ACLOperation.ANY,
                                            permission_type=ACLPermissionType.ANY,
                                            resource_pattern=ResourcePatternFilter(ResourceType.GROUP, None,
                                                                                   ACLResourcePatternType.ANY)))
    assert {(x.resource_pattern.resource_name, x.permission_type) for x in acls} == {
        ("app-", ACLPermissionType.ALLOW), ("app-secret", ACLPermissionType.DENY)}
    extra = allow("User:carol", ACLOperation.DESCRIBE, ResourceType.GROUP, "carol-group")
    assert not a.create_acls([extra])["failed"]
    deleted = a.delete_acls([ACLFilter(principal="User:carol", host="*", operation=ACLOperation.ANY,
                                       permission_type=ACLPermissionType.ANY,
                                       resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                                              ACLResourcePatternType.ANY))])
    assert len(deleted[0][1]) == 1
    a.close()


def test_acl_apis_need_the_cluster_permission(world):
    with alice(world) as c:
        R = m.CreateAclsRequest
        resp = c.request(30, 3, R(creations=[R.AclCreation(resource_type=3, resource_name="g", resource_pattern_type=3,
                                                           principal="User:alice", host="*", operation=2,
                                                           permission_type=3)]))
        assert [r.error_code for r in resp.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]


def test_group_denied_while_topic_allowed(world):
    with alice(world) as c:
        assert join(c, "g-closed").error_code == GAF
        assert commit(c, "g-closed", "t-read") == {"t-read": GAF}
        hb = c.request(12, 4, m.HeartbeatRequest(group_id="g-closed", generation_id=1, member_id="x",
                                                 group_instance_id=None))
        assert hb.error_code == GAF
        fc = c.request(10, 3, m.FindCoordinatorRequest(key="g-closed", key_type=0))
        assert fc.error_code == GAF


def test_prefixed_group_allowed_and_topics_checked_per_topic(world):
    with alice(world) as c:
        joined = join(c, f"app-{next(_n)}")
        assert joined.error_code == ErrorCode.NONE
        hb = c.request(12, 4, m.HeartbeatRequest(group_id="app-x", generation_id=1, member_id="nobody",
                                                 group_instance_id=None))
        assert hb.error_code == ErrorCode.UNKNOWN_MEMBER_ID  # authorized: the coordinator answers
        assert commit(c, "app-commits", "t-read") == {"t-read": ErrorCode.NONE}
        assert commit(c, "app-commits", "t-other") == {"t-other": TAF}
        R = m.OffsetFetchRequest
        fetched = c.request(9, 7, R(group_id="app-commits", topics=None, require_stable=False))
        assert [t.name for t in fetched.topics] == ["t-read"]


def test_deny_overrides_the_prefixed_allow(world):
    with alice(world) as c:
        assert join(c, "app-secret").error_code == GAF


def test_describe_and_list_groups_show_only_what_may_be_seen(world):
    a = admin(world)
    with raw(world.address("SASL_PLAINTEXT")) as root:  # groups alice may not see, made by the super user
        assert plain_login(root, "admin", "admin-secret").error_code == ErrorCode.NONE
        assert commit(root, "g-hidden", "t-read") == {"t-read": ErrorCode.NONE}
        assert commit(root, "app-visible", "t-read") == {"t-read": ErrorCode.NONE}
        listed_by_admin = {g.group_id for g in root.request(16, 4, m.ListGroupsRequest(states_filter=[])).groups}
    a.close()
    assert {"g-hidden", "app-visible"} <= listed_by_admin
    with alice(world) as c:
        listed = {g.group_id for g in c.request(16, 4, m.ListGroupsRequest(states_filter=[])).groups}
        assert "app-visible" in listed and "g-hidden" not in listed
        described = c.request(15, 5, m.DescribeGroupsRequest(groups=["g-hidden", "app-visible"],
                                                             include_authorized_operations=True)).groups
        assert [(g.group_id, g.error_code) for g in described] == [("g-hidden", GAF), ("app-visible", ErrorCode.NONE)]
        assert described[1].authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_metadata_lists_only_describable_topics(world):
    with alice(world) as c:
        md = c.request(3, 10, m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=True))
        assert [(t.name, t.topic_authorized_operations) for t in md.topics] == [
            ("t-read", (1 << Op.READ) | (1 << Op.DESCRIBE))]
        named = c.request(3, 10, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="t-other")],
                                                   allow_auto_topic_creation=True,
                                                   include_topic_authorized_operations=False))
        assert [(t.name, t.error_code) for t in named.topics] == [("t-other", TAF)]


def test_describe_configs_needs_describe_configs(world):
    """READ on a topic does not imply DESCRIBE_CONFIGS (ConfigAdminManager / AuthHelper)."""
    R = m.DescribeConfigsRequest
    req = R(resources=[R.DescribeConfigsResource(resource_type=2, resource_name="t-read", configuration_keys=None)],
            include_synonyms=False, include_documentation=False)
    with alice(world) as c:
        assert [r.error_code for r in c.request(32, 4, req).results] == [TAF]
    a = admin(world)
    a.create_acls([allow("User:alice", ACLOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, "t-read")])
    a.close()
    with alice(world) as c:
        (result,) = c.request(32, 4, req).results
        assert result.error_code == ErrorCode.NONE and result.configs


def test_acls_are_durable(world):
    from kcoord.testkit.waiting import wait_until

    world.restart()
    with alice(world) as c:
        assert join(c, "g-closed").error_code == GAF  # authorization comes before the coordinator
        # the coordinator's partitions load after the port opens: wait as clients retry
        wait_until(lambda: c.request(16, 4, m.ListGroupsRequest(states_filter=[])).error_code
                   != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 30, "__consumer_offsets loaded")
        assert join(c, f"app-{next(_n)}").error_code == ErrorCode.NONE


def test_data_plane_per_topic(world):
    """Produce needs WRITE, Fetch READ, ListOffsets DESCRIBE, per topic; the rest of the request is served."""
    from kcoord.protocol.records import build_batch

    P = m.ProduceRequest
    with alice(world) as c:
        produced = c.request(0, 9, P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            P.TopicProduceData(name=name, partition_data=[P.PartitionProduceData(
                index=0, records=build_batch([(b"k", b"v")]))]) for name in ("t-read", "t-other")]))
        assert {t.name: t.partition_responses[0].error_code for t in produced.responses} == {
            "t-read": TAF, "t-other": TAF}  # READ is not WRITE
        F = m.FetchRequest
        fetched = c.request(1, 11, F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                     session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=name, partitions=[
                                         F.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                          log_start_offset=-1, partition_max_bytes=1 << 20)])
                                         for name in ("t-read", "t-other")], forgotten_topics_data=[], rack_id=""))
        assert {t.topic: t.partitions[0].error_code for t in fetched.responses} == {
            "t-read": ErrorCode.NONE, "t-other": TAF}
        L = m.ListOffsetsRequest
        listed = c.request(2, 5, L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=name, partitions=[
            L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])
            for name in ("t-read", "t-other")]))
        assert {t.name: t.partitions[0].error_code for t in listed.topics} == {"t-read": ErrorCode.NONE, "t-other": TAF}


def test_offset_fetch_v8_per_group(world):
    R = m.OffsetFetchRequest
    with alice(world) as c:
        assert commit(c, "app-fetch", "t-read") == {"t-read": ErrorCode.NONE}
        resp = c.request(9, 8, R(groups=[R.OffsetFetchRequestGroup(group_id=g, topics=None)
                                         for g in ("g-closed", "app-fetch")], require_stable=False))
        assert [(g.group_id, g.error_code) for g in resp.groups] == [("g-closed", GAF), ("app-fetch", ErrorCode.NONE)]
        assert [t.name for t in resp.groups[1].topics] == ["t-read"]


def test_idempotent_producer_needs_a_write_permission(world):
    """KIP-679: InitProducerId without a transactional id needs IDEMPOTENT_WRITE on the cluster or WRITE
    on some topic, else CLUSTER_AUTHORIZATION_FAILED."""
    req = m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    with alice(world) as c:
        assert c.request(22, 4, req).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        ops = c.request(60, 0, m.DescribeClusterRequest(include_cluster_authorized_operations=True))
        assert ops.cluster_authorized_operations == 0
    a = admin(world)
    a.create_acls([allow("User:alice", ACLOperation.WRITE, ResourceType.TOPIC, "t-other")])
    a.close()
    with alice(world) as c:
        resp = c.request(22, 4, req)
        assert resp.error_code == ErrorCode.NONE and resp.producer_id >= 0


def test_real_consumers_through_acls(world):
    """kafka-python and confluent-kafka consume as alice: READ on the topic and the (prefixed) group is
    all a consumer group needs, as with Kafka; the group named without an ACL fails."""
    from kafka import KafkaProducer

    from kcoord.testkit.waiting import wait_until
    from tests.broker.groups import procs
    from tests.broker.groups.procs import stop_all

    producer = KafkaProducer(bootstrap_servers=world.address("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin-secret")
    for i in range(20):
        producer.send("t-read", key=f"k{i}".encode(), value=b"v", partition=i % 2)
    producer.flush(30)
    producer.close()
    sec = {"protocol": "SASL_PLAINTEXT", "mechanism": "PLAIN", "username": "alice", "password": "alice-secret"}
    consumers = [procs.python_consumer(client, world.address("SASL_PLAINTEXT"), f"app-real-{client}", "t-read",
                                       client, security=sec) for client in ("kafka-python", "confluent")]
    try:
        for c in consumers:
            wait_until(lambda c=c: len({k for _p, _o, k in c.records()}) >= 20, 60, c.describe())
    finally:
        stop_all(consumers)
    denied = procs.python_consumer("confluent", world.address("SASL_PLAINTEXT"), "g-closed", "t-read", "denied",
                                   security=sec)
    try:
        wait_until(lambda: any("GROUP_AUTHORIZATION_FAILED" in line or "Group authorization failed" in line
                               for line in denied.stderr_lines + denied.errors()), 60, denied.describe())
        assert not denied.records()
    finally:
        stop_all([denied])


def test_partition_and_config_admin_apis_need_their_acls(world):
    """alice may READ t-read but not ALTER, DELETE or ALTER_CONFIGS it, nor DESCRIBE the cluster:
    KafkaApis.handleCreatePartitionsRequest (ALTER), handleDeleteRecordsRequest (DELETE),
    ConfigAdminManager for AlterConfigs / IncrementalAlterConfigs (ALTER_CONFIGS), handleDescribeLogDirsRequest
    (DESCRIBE on the cluster), handleOffsetForLeaderEpochRequest (DESCRIBE on the topic; READ implies it)."""
    c = alice(world)
    cp = c.request(37, 3, m.CreatePartitionsRequest(topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(
        name="t-read", count=5, assignments=None)], timeout_ms=5000, validate_only=False))
    assert [(r.name, r.error_code) for r in cp.results] == [("t-read", TAF)]
    dr_topic = m.DeleteRecordsRequest.DeleteRecordsTopic
    dr = c.request(21, 2, m.DeleteRecordsRequest(topics=[dr_topic(name="t-read", partitions=[
        dr_topic.DeleteRecordsPartition(partition_index=0, offset=0)])], timeout_ms=5000))
    assert [(p.partition_index, p.error_code) for t in dr.topics for p in t.partitions] == [(0, TAF)]
    res = m.IncrementalAlterConfigsRequest.AlterConfigsResource
    iac = c.request(44, 1, m.IncrementalAlterConfigsRequest(resources=[res(resource_type=2, resource_name="t-read", configs=[
        res.AlterableConfig(name="retention.ms", config_operation=0, value="1000")])], validate_only=False))
    assert [(r.resource_name, r.error_code) for r in iac.responses] == [("t-read", TAF)]
    logdirs = c.request(35, 4, m.DescribeLogDirsRequest(topics=None))
    assert (logdirs.error_code, logdirs.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    topic = m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    ofe = c.request(23, 4, m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        topic(topic="t-read", partitions=[topic.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                         leader_epoch=0)]),
        topic(topic="t-unlisted", partitions=[topic.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                          leader_epoch=0)])]))
    assert {t.topic: t.partitions[0].error_code for t in ofe.topics} == {"t-read": ErrorCode.NONE, "t-unlisted": TAF}


def test_consumer_group_apis_need_their_acls(world):
    """KafkaApis.handleConsumerGroupHeartbeat (READ on the group) and handleConsumerGroupDescribe (DESCRIBE
    on each group): g-closed has no ACL for alice."""
    c = alice(world)
    R = m.ConsumerGroupHeartbeatRequest
    hb = c.request(68, 1, R(group_id="g-closed", member_id="", member_epoch=0, instance_id=None, rack_id=None,
                           rebalance_timeout_ms=30000, subscribed_topic_names=["t-read"], subscribed_topic_regex=None,
                           server_assignor=None, topic_partitions=[]))
    assert hb.error_code == GAF
    described = c.request(69, 0, m.ConsumerGroupDescribeRequest(group_ids=["g-closed"],
                                                                 include_authorized_operations=False))
    assert [(g.group_id, g.error_code) for g in described.groups] == [("g-closed", GAF)]
