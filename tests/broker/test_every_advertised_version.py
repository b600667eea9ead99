"""Everything ApiVersions advertises works: for each (api, version) in the registry, a minimal valid
request encoded with our codecs goes over TCP to the real server, and the answer decodes at that
version, fills its frame exactly, and carries no error anywhere (every `error_code` in it is NONE).
The one exception is Kafka's own: versions advertised below those served (Produce v0-2, KAFKA-18659)
close the connection, as Kafka's SocketServer.parseRequestHeader refuses a version it does not enable.

An API registered without a scenario here fails, so a newly advertised version cannot go untested.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from kcoord.broker import registry
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import decode_response_header
from kcoord.protocol.records import build_batch, iter_batches
from tests.security import every_version_scenarios
from tests.support.raw_kafka import RawKafka

TOPIC = "every-version"
COMMITTED = 1  # the offset committed for GROUP_WITH_OFFSETS
GROUP_WITH_OFFSETS = "every-version-committed"

ADVERTISED = [(spec, v) for spec in registry.served() for v in range(spec.min_version, spec.max_version + 1)]
REFUSED = [(spec, v) for spec in registry.served() for v in range(spec.advertised_min, spec.min_version)]


def call(c: RawKafka, key: int, version: int, body):
    """Send `body` at `version`; the response must decode at that version and end with its frame."""
    cid = c.send_request(key, version, body)
    frame = c.read_frame()
    got, pos = decode_response_header(frame, key, version)
    resp, end = m.response_codec(key, version).decode(frame, pos)
    assert got == cid
    assert end == len(frame), f"{end} of {len(frame)} bytes decoded"
    return resp


def error_codes(obj) -> list[int]:
    """Every error_code in a response, nested structs and arrays included."""
    found = []
    if isinstance(obj, list):
        for item in obj:
            found += error_codes(item)
    elif hasattr(obj, "__slots__"):
        for name in obj.__slots__:
            value = getattr(obj, name, None)
            if name == "error_code":
                found.append(value)
            elif isinstance(value, list) or hasattr(value, "__slots__"):
                found += error_codes(value)
    return found


# -- setup helpers (fixed versions, each tested on its own below) ------------------------------------
def create_topic(c: RawKafka, name: str, version: int = 7):
    T = m.CreateTopicsRequest.CreatableTopic
    return call(c, 19, version, m.CreateTopicsRequest(
        topics=[T(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False))


def commit(c: RawKafka, group: str, version: int = 8, topic_id: uuid.UUID | None = None, **member):
    """Commit COMMITTED to TOPIC's partition 0 (by `topic_id` from v10, where names are not sent)."""
    R = m.OffsetCommitRequest
    return call(c, 8, version, R(group_id=group, generation_id_or_member_epoch=member.get("generation", -1),
                                 member_id=member.get("member_id", ""), group_instance_id=None,
                                 retention_time_ms=-1, topics=[R.OffsetCommitRequestTopic(
                                     name=TOPIC, topic_id=topic_id, partitions=[R.OffsetCommitRequestPartition(
                                         partition_index=0, committed_offset=COMMITTED,
                                         committed_leader_epoch=-1, committed_metadata="")])]))


def join(c: RawKafka, group: str, version: int = 5):
    """A one-member group, joined at `version` (a second join with the id MEMBER_ID_REQUIRED gave)."""
    R = m.JoinGroupRequest
    req = R(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
            group_instance_id=None, protocol_type="consumer",
            protocols=[R.JoinGroupRequestProtocol(name="range", metadata=b"")], reason="every version")
    resp = call(c, 11, version, req)
    if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        req.member_id = resp.member_id
        resp = call(c, 11, version, req)
    return resp


def sync(c: RawKafka, group: str, joined, version: int = 3):
    R = m.SyncGroupRequest
    return call(c, 14, version, R(group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
                                  group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                  assignments=[R.SyncGroupRequestAssignment(member_id=joined.member_id,
                                                                            assignment=b"")]))


def stable_group(c: RawKafka, group: str):
    joined = join(c, group)
    assert sync(c, group, joined).error_code == ErrorCode.NONE
    return joined


# -- one scenario per API: (connection, version, environment) -> response ---------------------------
def produce(c, v, env):
    R = m.ProduceRequest
    topic = R.TopicProduceData(name=TOPIC, topic_id=env.get("topic_id"), partition_data=[
        R.TopicProduceData.PartitionProduceData(index=0, records=build_batch([(b"k", b"v%d" % v)]))])
    resp = call(c, 0, v, R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[topic]))
    if v >= 13:  # topics by id (KIP-516)
        assert resp.responses[0].topic_id == env["topic_id"]
    return resp


def fetch(c, v, env):
    R = m.FetchRequest
    part = R.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                       current_leader_epoch=-1, last_fetched_epoch=-1, log_start_offset=-1)
    topic = R.FetchTopic(topic=TOPIC, topic_id=env["topic_id"], partitions=[part])
    resp = call(c, 1, v, R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[topic], forgotten_topics_data=[], rack_id=""))
    assert list(iter_batches(resp.responses[0].partitions[0].records or b"")), "no records fetched"
    return resp


def list_offsets(c, v, env):
    R = m.ListOffsetsRequest
    resp = call(c, 2, v, R(replica_id=-1, isolation_level=0, topics=[R.ListOffsetsTopic(
        name=TOPIC, partitions=[R.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
    assert resp.topics[0].partitions[0].offset >= 1
    return resp


def metadata(c, v, env):
    R = m.MetadataRequest
    resp = call(c, 3, v, R(topics=[R.MetadataRequestTopic(name=TOPIC, topic_id=uuid.UUID(int=0))],
                            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert [t.name for t in resp.topics] == [TOPIC] and len(resp.brokers) == 1
    return resp


def offset_commit(c, v, env):
    resp = commit(c, f"commit-v{v}", version=v, topic_id=env["topic_id"] if v >= 10 else None)
    if v >= 10:  # answered by id (KafkaApis.handleOffsetCommitRequest)
        assert [t.topic_id for t in resp.topics] == [env["topic_id"]]
    return resp


def offset_fetch(c, v, env):
    R = m.OffsetFetchRequest
    if v >= 8:
        resp = call(c, 9, v, R(groups=[R.OffsetFetchRequestGroup(
            group_id=GROUP_WITH_OFFSETS, member_id=None, member_epoch=-1,
            topics=[R.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                name=TOPIC, topic_id=env["topic_id"] if v >= 10 else None, partition_indexes=[0])])],
            require_stable=False))
        partition = resp.groups[0].topics[0].partitions[0]
        if v >= 10:  # answered by id (KafkaApis.fetchOffsetsForGroup)
            assert resp.groups[0].topics[0].topic_id == env["topic_id"]
    else:
        resp = call(c, 9, v, R(group_id=GROUP_WITH_OFFSETS, require_stable=False,
                               topics=[R.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])]))
        partition = resp.topics[0].partitions[0]
    assert partition.committed_offset == COMMITTED
    return resp


def find_coordinator(c, v, env):
    group = env["stable"]
    resp = call(c, 10, v, m.FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group]))
    port = resp.coordinators[0].port if v >= 4 else resp.port
    assert port == c.sock.getpeername()[1]
    return resp


def join_group(c, v, env):
    resp = join(c, f"join-v{v}", version=v)
    assert resp.generation_id >= 1 and resp.member_id
    return resp


def heartbeat(c, v, env):
    group = f"heartbeat-v{v}"
    joined = stable_group(c, group)
    return call(c, 12, v, m.HeartbeatRequest(group_id=group, generation_id=joined.generation_id,
                                             member_id=joined.member_id, group_instance_id=None))


def leave_group(c, v, env):
    group = f"leave-v{v}"
    joined = stable_group(c, group)
    R = m.LeaveGroupRequest
    resp = call(c, 13, v, R(group_id=group, member_id=joined.member_id, members=[R.MemberIdentity(
        member_id=joined.member_id, group_instance_id=None, reason="every version")]))
    if v >= 3:
        assert [mr.member_id for mr in resp.members] == [joined.member_id]
    return resp


def sync_group(c, v, env):
    group = f"sync-v{v}"
    return sync(c, group, join(c, group), version=v)


def describe_groups(c, v, env):
    resp = call(c, 15, v, m.DescribeGroupsRequest(groups=[env["stable"]], include_authorized_operations=False))
    assert [(g.group_state, len(g.members)) for g in resp.groups] == [("Stable", 1)]
    return resp


def list_groups(c, v, env):
    resp = call(c, 16, v, m.ListGroupsRequest(states_filter=[], types_filter=[]))
    assert env["stable"] in {g.group_id for g in resp.groups}
    return resp


def api_versions(c, v, env):
    resp = call(c, 18, v, m.ApiVersionsRequest(client_software_name="every-version", client_software_version="1"))
    # all but client telemetry's two, listed only with the receiver on (tests/broker/telemetry)
    assert {k.api_key for k in resp.api_keys} == {spec.key for spec in registry.served()} - {71, 72}
    if v >= 3:  # the features, tagged (metadata/features.py); group.version's minimum 0 is left out at v3
        assert {f.name: f.max_version_level for f in resp.finalized_features} == {
            "metadata.version": 30, "group.version": 1, "transaction.version": 2, "share.version": 1}
        assert {f.name for f in resp.supported_features} == (
            {"metadata.version", "group.version", "transaction.version", "share.version"} if v >= 4
            else {"metadata.version"})
    return resp


def create_topics(c, v, env):
    return create_topic(c, f"created-v{v}", version=v)


def delete_topics(c, v, env):
    name = f"deleted-v{v}"
    assert create_topic(c, name).topics[0].error_code == ErrorCode.NONE
    R = m.DeleteTopicsRequest
    return call(c, 20, v, R(topic_names=[name], topics=[R.DeleteTopicState(name=name, topic_id=uuid.UUID(int=0))],
                            timeout_ms=5000))


def init_producer_id(c, v, env):
    resp = call(c, 22, v, m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                  producer_id=-1, producer_epoch=-1))
    assert resp.producer_id >= 0
    begin_txn(c, f"init-v{v}")  # loaded
    txn = call(c, 22, v, m.InitProducerIdRequest(transactional_id=f"init-v{v}", transaction_timeout_ms=60000,
                                                 producer_id=-1, producer_epoch=-1))
    assert (txn.error_code, txn.producer_epoch) == (ErrorCode.NONE, 1)
    return resp


def describe_configs(c, v, env):
    R = m.DescribeConfigsRequest
    resp = call(c, 32, v, R(resources=[
        R.DescribeConfigsResource(resource_type=2, resource_name=TOPIC, configuration_keys=None),
        R.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=["log.retention.ms"]),
        R.DescribeConfigsResource(resource_type=32, resource_name=env["stable"], configuration_keys=None)],
        include_synonyms=True, include_documentation=True))
    assert any(e.name == "cleanup.policy" for e in resp.results[0].configs)
    assert [e.name for e in resp.results[1].configs] == ["log.retention.ms"]
    assert any(e.name == "consumer.session.timeout.ms" for e in resp.results[2].configs)
    return resp


def delete_groups(c, v, env):
    group = f"delete-groups-v{v}"
    assert error_codes(commit(c, group)) == [ErrorCode.NONE]
    return call(c, 42, v, m.DeleteGroupsRequest(groups_names=[group]))


def offset_delete(c, v, env):
    group = f"offset-delete-v{v}"
    assert error_codes(commit(c, group)) == [ErrorCode.NONE]
    R = m.OffsetDeleteRequest
    return call(c, 47, v, R(group_id=group, topics=[R.OffsetDeleteRequestTopic(
        name=TOPIC, partitions=[R.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])]))


def describe_cluster(c, v, env):
    resp = call(c, 60, v, m.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1))
    assert [b.port for b in resp.brokers] == [c.sock.getpeername()[1]]
    return resp


def begin_txn(c: RawKafka, txn_id: str) -> tuple[int, int]:
    """A transactional producer id and epoch (InitProducerId v4, retried while the coordinator loads)."""
    for _ in range(200):
        resp = call(c, 22, 4, m.InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000,
                                                      producer_id=-1, producer_epoch=-1))
        if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            assert resp.error_code == ErrorCode.NONE
            return resp.producer_id, resp.producer_epoch
        time.sleep(0.05)
    raise AssertionError("the transaction coordinator did not load")


def add_partitions_to_txn(c, v, env):
    txn_id = f"add-partitions-v{v}"
    pid, epoch = begin_txn(c, txn_id)
    R = m.AddPartitionsToTxnRequest
    topics = [R.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]
    if v < 4:
        return call(c, 24, v, R(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                                v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics))
    return call(c, 24, v, R(transactions=[R.AddPartitionsToTxnTransaction(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, verify_only=False, topics=topics)]))


def add_offsets_to_txn(c, v, env):
    txn_id = f"add-offsets-v{v}"
    pid, epoch = begin_txn(c, txn_id)
    return call(c, 25, v, m.AddOffsetsToTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                                   group_id=f"add-offsets-v{v}"))


def end_txn(c, v, env):
    txn_id = f"end-txn-v{v}"
    pid, epoch = begin_txn(c, txn_id)
    assert error_codes(call(c, 25, 3, m.AddOffsetsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=txn_id))) == [ErrorCode.NONE]
    return call(c, 26, v, m.EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                          committed=True))


def txn_offset_commit(c, v, env):
    txn_id = group = f"txn-offset-commit-v{v}"
    pid, epoch = begin_txn(c, txn_id)
    assert error_codes(call(c, 25, 3, m.AddOffsetsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group))) == [ErrorCode.NONE]
    R = m.TxnOffsetCommitRequest
    T = R.TxnOffsetCommitRequestTopic
    return call(c, 28, v, R(transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
                            generation_id=-1, member_id="", group_instance_id=None, topics=[T(
                                name=TOPIC, partitions=[T.TxnOffsetCommitRequestPartition(
                                    partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                    committed_metadata="")])]))


def describe_transactions(c, v, env):
    begin_txn(c, "describe-txn")
    resp = call(c, 65, v, m.DescribeTransactionsRequest(transactional_ids=["describe-txn"]))
    assert [t.transaction_state for t in resp.transaction_states] == ["Empty"]
    return resp


def list_transactions(c, v, env):
    begin_txn(c, f"list-txn-v{v}")
    resp = call(c, 66, v, m.ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1,
                                                    transactional_id_pattern=f"list-txn-v{v}" if v >= 2 else None))
    listed = {t.transactional_id for t in resp.transaction_states}
    assert f"list-txn-v{v}" in listed
    if v >= 2:
        assert listed == {f"list-txn-v{v}"}
    return resp


def describe_producers(c, v, env):
    R = m.DescribeProducersRequest
    return call(c, 61, v, R(topics=[R.TopicRequest(name=TOPIC, partition_indexes=[0])]))


def write_txn_markers(c, v, env):
    Rq = m.WriteTxnMarkersRequest
    return call(c, 27, v, Rq(markers=[Rq.WritableTxnMarker(
        producer_id=999_999, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[Rq.WritableTxnMarker.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])])]))


def create_partitions(c, v, env):
    name = f"grown-v{v}"
    assert create_topic(c, name).topics[0].error_code == ErrorCode.NONE
    T = m.CreatePartitionsRequest.CreatePartitionsTopic
    resp = call(c, 37, v, m.CreatePartitionsRequest(topics=[T(name=name, count=3, assignments=None)],
                                                    timeout_ms=5000, validate_only=False))
    md = call(c, 3, 12, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=name)],
                                          allow_auto_topic_creation=False))
    assert len(md.topics[0].partitions) == 3
    return resp


def delete_records(c, v, env):
    name = f"trimmed-v{v}"
    assert create_topic(c, name).topics[0].error_code == ErrorCode.NONE
    R = m.ProduceRequest
    call(c, 0, 9, R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=name, partition_data=[R.TopicProduceData.PartitionProduceData(
            index=0, records=build_batch([(b"k", b"a"), (b"k", b"b")]))])]))
    D = m.DeleteRecordsRequest
    resp = call(c, 21, v, D(topics=[D.DeleteRecordsTopic(name=name, partitions=[
        D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=1)])], timeout_ms=5000))
    assert resp.topics[0].partitions[0].low_watermark == 1
    return resp


def alter_configs(c, v, env):
    R = m.AlterConfigsRequest
    A = R.AlterConfigsResource
    resp = call(c, 33, v, R(resources=[
        A(resource_type=2, resource_name=TOPIC, configs=[A.AlterableConfig(name="retention.ms", value=f"{v + 1}00000")]),
        A(resource_type=32, resource_name=f"group-v{v}", configs=[
            A.AlterableConfig(name="consumer.session.timeout.ms", value="50000")])], validate_only=False))
    assert [r.resource_type for r in resp.responses] == [2, 32]
    return resp


def incremental_alter_configs(c, v, env):
    R = m.IncrementalAlterConfigsRequest
    A = R.AlterConfigsResource
    resp = call(c, 44, v, R(resources=[
        A(resource_type=2, resource_name=TOPIC, configs=[
            A.AlterableConfig(name="cleanup.policy", config_operation=2, value="compact")]),
        A(resource_type=4, resource_name="", configs=[
            A.AlterableConfig(name="log.retention.bytes", config_operation=0, value=str(10**12 + v))])],
        validate_only=True))
    assert len(resp.responses) == 2
    return resp


def describe_log_dirs(c, v, env):
    resp = call(c, 35, v, m.DescribeLogDirsRequest(topics=[
        m.DescribeLogDirsRequest.DescribableLogDirTopic(topic=TOPIC, partitions=[0])]))
    (result,) = resp.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [(TOPIC, [0])]
    assert result.topics[0].partitions[0].partition_size > 0
    return resp


def node_id(c: RawKafka) -> int:
    return call(c, 3, 1, m.MetadataRequest(topics=[])).brokers[0].node_id


def elect_leaders(c, v, env):
    """Null partitions = every partition; a one-broker cluster needs no election anywhere, and Kafka leaves
    ELECTION_NOT_NEEDED partitions out of such an answer (ReplicationControlManager.electLeaders)."""
    resp = call(c, 43, v, m.ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=5000))
    assert all(not r.partition_result for r in resp.replica_election_results)
    return resp


def alter_partition_reassignments(c, v, env):
    """The one valid target on one broker: the partition's own replica (no change)."""
    R = m.AlterPartitionReassignmentsRequest
    resp = call(c, 45, v, R(timeout_ms=5000, allow_replication_factor_change=False, topics=[R.ReassignableTopic(
        name=TOPIC, partitions=[R.ReassignableTopic.ReassignablePartition(partition_index=0,
                                                                        replicas=[node_id(c)])])]))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.responses] == [(TOPIC, [0])]
    return resp


def list_partition_reassignments(c, v, env):
    resp = call(c, 46, v, m.ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None))
    assert resp.topics == []
    return resp


def describe_topic_partitions(c, v, env):
    R = m.DescribeTopicPartitionsRequest
    resp = call(c, 75, v, R(topics=[R.TopicRequest(name=TOPIC)], response_partition_limit=1,
                            cursor=R.Cursor(topic_name=TOPIC, partition_index=0)))
    (topic,) = resp.topics
    assert topic.name == TOPIC and [p.partition_index for p in topic.partitions] == [0]
    assert topic.partitions[0].replica_nodes == topic.partitions[0].isr_nodes == [node_id(c)]
    return resp


def offset_for_leader_epoch(c, v, env):
    R = m.OffsetForLeaderEpochRequest
    T = R.OffsetForLeaderTopic
    resp = call(c, 23, v, R(replica_id=-1, topics=[T(topic=TOPIC, partitions=[
        T.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0)])]))
    (p,) = resp.topics[0].partitions
    assert (p.leader_epoch, p.end_offset >= 1) == (0, True)
    return resp


def consumer_group_heartbeat(c, v, env, group: str | None = None):
    """Joins a consumer group (KIP-848): the one member gets every partition of the topic
    (GroupMetadataManager.consumerGroupHeartbeat)."""
    R = m.ConsumerGroupHeartbeatRequest
    resp = call(c, 68, v, R(group_id=group or f"cgh-v{v}", member_id="", member_epoch=0, instance_id=None, rack_id=None,
                            rebalance_timeout_ms=30000, subscribed_topic_names=[TOPIC], subscribed_topic_regex=None,
                            server_assignor=None, topic_partitions=[]))
    assert resp.member_id and resp.member_epoch == 1
    assert [(tp.topic_id, tp.partitions) for tp in resp.assignment.topic_partitions] == [(env["topic_id"], [0])]
    return resp


def share_group_heartbeat(c, v, env, group: str | None = None):
    """Joins a share group (KIP-932) with the client's own member id: the one member gets every partition
    (GroupMetadataManager.shareGroupHeartbeat, SimpleAssignor)."""
    R = m.ShareGroupHeartbeatRequest
    resp = call(c, 76, v, R(group_id=group or f"sgh-v{v}", member_id="share-member-1", member_epoch=0, rack_id=None,
                            subscribed_topic_names=[TOPIC]))
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, "share-member-1", 1)
    assert [(tp.topic_id, tp.partitions) for tp in resp.assignment.topic_partitions] == [(env["topic_id"], [0])]
    return resp


def share_group_describe(c, v, env):
    """A share group of one member: epochs 1/1, the simple assignor, its assignment by id and name
    (GroupMetadataManager.shareGroupDescribe, ShareGroup.asDescribedGroup)."""
    share_group_heartbeat(c, 1, env, group=f"sgd-v{v}")
    resp = call(c, 77, v, m.ShareGroupDescribeRequest(group_ids=[f"sgd-v{v}"], include_authorized_operations=False))
    (g,) = resp.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (0, "Stable", 1, 1, "simple")
    (member,) = g.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == ("share-member-1", 1, [TOPIC])
    assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [(TOPIC, [0])]
    return resp


def share_fetch(c, v, env, member: str | None = None):
    """A new share session (epoch 0) on TOPIC's partition 0: the full response lists the partition, with
    the group's acquisition lock duration (SharePartitionManager.newContext, KafkaApis.handleShareFetchRequest).
    The share-partition starts at the latest offset (share.auto.offset.reset's default), so nothing is
    acquired."""
    R = m.ShareFetchRequest
    body = dict(group_id=f"sf-v{v}", member_id=member or f"share-fetcher-{v}", share_session_epoch=0, max_wait_ms=0,
                min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10, forgotten_topics_data=[],
                topics=[R.FetchTopic(topic_id=env["topic_id"], partitions=[
                    R.FetchTopic.FetchPartition(partition_index=0, acknowledgement_batches=[])])])
    if v >= 2:
        body.update(share_acquire_mode=0, is_renew_ack=False)
    resp = call(c, 78, v, R(**body))
    assert resp.acquisition_lock_timeout_ms == 30000
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in resp.responses] == [(env["topic_id"], [0])]
    return resp


def share_acknowledge(c, v, env):
    """An acknowledgement with nothing to acknowledge in an open session (epoch 1): NONE for the partition
    (SharePartitionManager.acknowledgeSessionUpdate, SharePartition.acknowledge)."""
    share_fetch(c, 1, env, member=f"share-acker-{v}")
    R = m.ShareAcknowledgeRequest
    body = dict(group_id="sf-v1", member_id=f"share-acker-{v}", share_session_epoch=1,
                topics=[R.AcknowledgeTopic(topic_id=env["topic_id"], partitions=[
                    R.AcknowledgeTopic.AcknowledgePartition(partition_index=0, acknowledgement_batches=[])])])
    if v >= 2:
        body["is_renew_ack"] = False
    resp = call(c, 79, v, R(**body))
    assert [p.partition_index for t in resp.responses for p in t.partitions] == [0]
    return resp


def describe_share_group_offsets(c, v, env):
    """A share group with a share-partition initialized by a ShareFetch: its start offset (the latest
    offset, share.auto.offset.reset's default) and from v1 its lag, 0
    (GroupCoordinatorService.describeShareGroupOffsets)."""
    group = f"sgo-v{v}"
    share_group_heartbeat(c, 1, env, group=group)
    R = m.ShareFetchRequest
    call(c, 78, 1, R(group_id=group, member_id="share-member-1", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
                     max_bytes=1 << 20, max_records=10, batch_size=10, forgotten_topics_data=[],
                     topics=[R.FetchTopic(topic_id=env["topic_id"], partitions=[
                         R.FetchTopic.FetchPartition(partition_index=0, acknowledgement_batches=[])])]))
    D = m.DescribeShareGroupOffsetsRequest
    resp = call(c, 90, v, D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]))
    ((topic,),) = [g.topics for g in resp.groups]
    ((p,),) = [topic.partitions]
    assert (topic.topic_name, p.partition_index, p.start_offset >= 1, p.lag) == (TOPIC, 0, True, 0 if v >= 1 else -1)
    return resp


def empty_share_group(c, group: str, env) -> None:
    """A share group whose only member joined and left (GroupMetadataManager.shareGroupHeartbeat, epoch -1)."""
    share_group_heartbeat(c, 1, env, group=group)
    resp = call(c, 76, 1, m.ShareGroupHeartbeatRequest(group_id=group, member_id="share-member-1", member_epoch=-1,
                                                       rack_id=None, subscribed_topic_names=None))
    assert resp.error_code == ErrorCode.NONE


def alter_share_group_offsets(c, v, env):
    """An empty share group's share-partition reset to offset 0 (GroupCoordinatorService.alterShareGroupOffsets)."""
    group = f"asgo-v{v}"
    empty_share_group(c, group, env)
    A = m.AlterShareGroupOffsetsRequest
    resp = call(c, 91, v, A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=[
        A.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]))
    assert [(r.topic_name, r.topic_id) for r in resp.responses] == [(TOPIC, env["topic_id"])]
    return resp


def delete_share_group_offsets(c, v, env):
    """An empty share group's state for TOPIC deleted (GroupCoordinatorService.deleteShareGroupOffsets)."""
    group = f"dsgo-v{v}"
    empty_share_group(c, group, env)
    D = m.DeleteShareGroupOffsetsRequest
    resp = call(c, 92, v, D(group_id=group, topics=[D.DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC)]))
    assert [(r.topic_name, r.topic_id) for r in resp.responses] == [(TOPIC, env["topic_id"])]
    return resp


def consumer_group_describe(c, v, env):
    """A consumer group of one member: epochs 1/1, its assignment and target by topic id and name
    (GroupMetadataManager.consumerGroupDescribe, ConsumerGroup.asDescribedGroup)."""
    joined = consumer_group_heartbeat(c, 1, env, group=f"cgd-v{v}")
    resp = call(c, 69, v, m.ConsumerGroupDescribeRequest(group_ids=[f"cgd-v{v}"], include_authorized_operations=False))
    (g,) = resp.groups
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == ("Stable", 1, 1, "uniform")
    (member,) = g.members
    assert (member.member_id, member.member_epoch) == (joined.member_id, 1)
    if v >= 1:
        assert member.member_type == 1  # a consumer-protocol member (KIP-1099)
    want = [(env["topic_id"], TOPIC, [0])]
    for a in (member.assignment, member.target_assignment):
        assert [(tp.topic_id, tp.topic_name, tp.partitions) for tp in a.topic_partitions] == want
    return resp


def update_features(c, v, env):
    """An upgrade of group.version to its finalized level, validate-only from v1 (the shared server keeps its
    levels): no change, one NONE result per feature at v0-1, none at v2 (QuorumController.updateFeatures)."""
    R = m.UpdateFeaturesRequest
    resp = call(c, 57, v, R(timeout_ms=1000, validate_only=v >= 1, feature_updates=[R.FeatureUpdateKey(
        feature="group.version", max_version_level=1, allow_downgrade=False, upgrade_type=1)]))
    assert [r.feature for r in resp.results] == (["group.version"] if v <= 1 else [])
    return resp


def list_config_resources(c, v, env):
    """v0 lists CLIENT_METRICS only; v1 every type, TOPIC among them
    (ListConfigResourcesRequest.supportedResourceTypes)."""
    resp = call(c, 74, v, m.ListConfigResourcesRequest(resource_types=[]))
    assert ((2, TOPIC) in {(r.resource_type, r.resource_name) for r in resp.config_resources}) == (v >= 1)
    return resp


def get_telemetry_subscriptions(c, v, env):
    """A first request (zero instance id) is given an instance id (ClientMetricsManager
    .processGetTelemetrySubscriptionRequest); served whether or not the receiver is on, as Kafka serves it."""
    resp = call(c, 71, v, m.GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)))
    assert resp.client_instance_id != uuid.UUID(int=0)
    return resp


def push_telemetry(c, v, env):
    """The first push after a GetTelemetrySubscriptions is due at once (ClientMetricsInstance
    .maybeUpdatePushRequestTimestamp), with the subscription id it gave."""
    sub = call(c, 71, 0, m.GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)))
    return call(c, 72, v, m.PushTelemetryRequest(
        client_instance_id=sub.client_instance_id, subscription_id=sub.subscription_id, terminating=False,
        compression_type=0, metrics=b""))


def alter_client_quotas(c, v, env):
    """A validate-only quota for one client id (the shared server keeps none): one NONE entry per entity
    (ClientQuotaControlManager.alterClientQuotas)."""
    R = m.AlterClientQuotasRequest
    resp = call(c, 49, v, R(validate_only=True, entries=[R.EntryData(
        entity=[R.EntityData(entity_type="client-id", entity_name=f"every-version-{v}")],
        ops=[R.OpData(key="producer_byte_rate", value=1024.0, remove=False)])]))
    assert [(e.entity[0].entity_name, e.error_code) for e in resp.entries] == [(f"every-version-{v}", 0)]
    return resp


def describe_client_quotas(c, v, env):
    """Every entity with a user (none on the shared server): an empty list, not null (ClientQuotasImage.describe)."""
    R = m.DescribeClientQuotasRequest
    resp = call(c, 48, v, R(components=[R.ComponentData(entity_type="user", match_type=2, match=None)],
                            strict=False))
    assert resp.entries == []
    return resp


def initialize_share_group_state(c, v, env):
    """InitializeShareGroupState on a share-partition without state (a single node is the share
    coordinator of every key): NONE (ShareCoordinatorShard.initializeState)."""
    R = m.InitializeShareGroupStateRequest
    resp = call(c, 83, v, R(group_id=f"share-state-init-v{v}", topics=[R.InitializeStateData(
        topic_id=env["topic_id"], partitions=[R.PartitionData(partition=0, state_epoch=0, start_offset=0)])]))
    assert [p.partition for t in resp.results for p in t.partitions] == [0]
    return resp


def read_share_group_state(c, v, env):
    """ReadShareGroupState after an InitializeShareGroupState: its start offset back
    (ShareCoordinatorShard.readStateAndMaybeUpdateLeaderEpoch)."""
    group = f"share-state-read-v{v}"
    Init = m.InitializeShareGroupStateRequest
    call(c, 83, 0, Init(group_id=group, topics=[Init.InitializeStateData(topic_id=env["topic_id"], partitions=[
        Init.PartitionData(partition=0, state_epoch=0, start_offset=1)])]))
    R = m.ReadShareGroupStateRequest
    resp = call(c, 84, v, R(group_id=group, topics=[R.ReadStateData(topic_id=env["topic_id"], partitions=[
        R.PartitionData(partition=0, leader_epoch=0)])]))
    assert [(p.start_offset, p.state_epoch) for t in resp.results for p in t.partitions] == [(1, 0)]
    return resp


def write_share_group_state(c, v, env):
    """WriteShareGroupState over an initialized share-partition: an ACKNOWLEDGED batch and a new start
    offset, NONE (ShareCoordinatorShard.writeState)."""
    group = f"share-state-write-v{v}"
    Init = m.InitializeShareGroupStateRequest
    call(c, 83, 0, Init(group_id=group, topics=[Init.InitializeStateData(topic_id=env["topic_id"], partitions=[
        Init.PartitionData(partition=0, state_epoch=0, start_offset=0)])]))
    R = m.WriteShareGroupStateRequest
    part = R.PartitionData(partition=0, state_epoch=0, leader_epoch=0, start_offset=0, state_batches=[
        R.StateBatch(first_offset=0, last_offset=0, delivery_state=2, delivery_count=1)])
    if v >= 1:
        part.delivery_complete_count = 1
    resp = call(c, 85, v, R(group_id=group, topics=[R.WriteStateData(topic_id=env["topic_id"], partitions=[part])]))
    assert [p.partition for t in resp.results for p in t.partitions] == [0]
    return resp


def delete_share_group_state(c, v, env):
    """DeleteShareGroupState of a share-partition (with or without state): NONE."""
    R = m.DeleteShareGroupStateRequest
    resp = call(c, 86, v, R(group_id=f"share-state-delete-v{v}", topics=[R.DeleteStateData(
        topic_id=env["topic_id"], partitions=[R.PartitionData(partition=0)])]))
    assert [p.partition for t in resp.results for p in t.partitions] == [0]
    return resp


def read_share_group_state_summary(c, v, env):
    """ReadShareGroupStateSummary of a share-partition without state: StartOffset -1
    (ShareCoordinatorShard.readStateSummary)."""
    R = m.ReadShareGroupStateSummaryRequest
    resp = call(c, 87, v, R(group_id=f"share-state-summary-v{v}", topics=[R.ReadStateSummaryData(
        topic_id=env["topic_id"], partitions=[R.PartitionData(partition=0, leader_epoch=0)])]))
    assert [p.start_offset for t in resp.results for p in t.partitions] == [-1]
    return resp


SCENARIOS: dict[int, Callable] = {
    0: produce, 1: fetch, 2: list_offsets, 3: metadata, 8: offset_commit, 9: offset_fetch, 10: find_coordinator,
    11: join_group, 12: heartbeat, 13: leave_group, 14: sync_group, 15: describe_groups, 16: list_groups,
    18: api_versions, 19: create_topics, 20: delete_topics, 21: delete_records, 22: init_producer_id, 23: offset_for_leader_epoch,
    32: describe_configs, 33: alter_configs, 35: describe_log_dirs, 37: create_partitions, 42: delete_groups, 44: incremental_alter_configs,
    43: elect_leaders, 45: alter_partition_reassignments, 46: list_partition_reassignments, 75: describe_topic_partitions,
    47: offset_delete, 57: update_features, 60: describe_cluster, 74: list_config_resources, 68: consumer_group_heartbeat, 69: consumer_group_describe,
    76: share_group_heartbeat, 77: share_group_describe, 78: share_fetch, 79: share_acknowledge,
    83: initialize_share_group_state, 84: read_share_group_state, 85: write_share_group_state,
    86: delete_share_group_state, 87: read_share_group_state_summary,
    90: describe_share_group_offsets, 91: alter_share_group_offsets, 92: delete_share_group_offsets,
    71: get_telemetry_subscriptions, 72: push_telemetry, 48: describe_client_quotas, 49: alter_client_quotas,
    **every_version_scenarios.SCENARIOS,  # SASL, ACL and SCRAM admin APIs, on a server with security on
    24: add_partitions_to_txn, 25: add_offsets_to_txn, 26: end_txn, 28: txn_offset_commit,
    61: describe_producers, 65: describe_transactions, 66: list_transactions, 27: write_txn_markers,
}


@pytest.fixture(scope="module")
def secure_server(tmp_path_factory):
    srv = every_version_scenarios.start(tmp_path_factory.mktemp("every-version-secure"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def env(kcoord_shared_server, secure_server):
    """A topic with a record in it, a group with a committed offset, and a stable one-member group."""
    with RawKafka(kcoord_shared_server.port) as c:
        assert error_codes(create_topic(c, TOPIC)) == [ErrorCode.NONE]
        assert error_codes(produce(c, 9, {})) == [ErrorCode.NONE]
        assert error_codes(commit(c, GROUP_WITH_OFFSETS)) == [ErrorCode.NONE]
        stable_group(c, "every-version-stable")
        md = call(c, 3, 12, m.MetadataRequest(topics=None, allow_auto_topic_creation=False))
        topic_id = next(t.topic_id for t in md.topics if t.name == TOPIC)
    return {"topic_id": topic_id, "stable": "every-version-stable", "port": kcoord_shared_server.port,
            "secure": secure_server}


@pytest.mark.parametrize(("spec", "version"), ADVERTISED, ids=[f"{s.name}-v{v}" for s, v in ADVERTISED])
def test_advertised_version_answers_without_error(env, spec, version):
    scenario = SCENARIOS.get(spec.key)
    assert scenario is not None, f"{spec.name} is advertised but has no scenario in this test"
    with RawKafka(env["port"]) as c:
        resp = scenario(c, version, env)
    errors = error_codes(resp)
    assert errors and all(code == ErrorCode.NONE for code in errors), (spec.name, version, resp)


@pytest.mark.parametrize(("spec", "version"), REFUSED, ids=[f"{s.name}-v{v}" for s, v in REFUSED])
def test_advertised_but_refused_version_closes_the_connection(env, spec, version):
    with RawKafka(env["port"]) as c:
        c.send_request(spec.key, version, body=b"\x00\x01\x00\x00\x03\xe8\x00\x00\x00\x00")
        assert c.closed_by_peer(), (spec.name, version)


def test_only_produce_is_advertised_below_what_it_serves():
    assert {(spec.name, v) for spec, v in REFUSED} == {("Produce", 0), ("Produce", 1), ("Produce", 2)}
