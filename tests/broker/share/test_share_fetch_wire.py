"""ShareFetch / ShareAcknowledge (KIP-932) at the wire: share sessions, acquisition, acknowledgement
and its errors, each test citing the Kafka 4.2 source it follows (core/src/main/java/kafka/server/share/
SharePartitionManager.java and SharePartition.java, core/src/main/scala/kafka/server/KafkaApis.scala
handleShareFetchRequest / handleShareAcknowledgeRequest)."""
from __future__ import annotations

import signal
import uuid

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.groups.group_server import start_group_server

TOPIC = "share-data"
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4
SF, SA = m.ShareFetchRequest, m.ShareAcknowledgeRequest


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_group_server(tmp_path_factory.mktemp("share-fetch"), name="share-fetch",
                             overrides={"group.share.delivery.count.limit": "3", "metrics.port": "0"})
    srv.create_topic(TOPIC, 1)
    srv.produce_keyed(TOPIC, 10)
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    with KafkaWireClient.connect(server.bootstrap, timeout=30, client_id="share-fetch-wire") as c:
        yield c


def topic_id(client) -> uuid.UUID:
    md = client.request(m.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    return next(t.topic_id for t in md.topics if t.name == TOPIC)


def earliest(server, group: str, **configs: str) -> None:
    """share.auto.offset.reset=earliest for `group`, and `configs` ("share_isolation_level" for
    share.isolation.level): group configs, through AlterConfigs."""
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="share-fetch-admin")
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, group, configs={
            "share.auto.offset.reset": "earliest", **{k.replace("_", "."): v for k, v in configs.items()}})])
    finally:
        admin.close()


def fetch(client, group, member, epoch, tid, acks=None, max_records=100, max_wait_ms=0, version=1, forget=None,
          partitions=(0,), **v2):
    topics = [SF.FetchTopic(topic_id=tid, partitions=[
        SF.FetchTopic.FetchPartition(partition_index=p, acknowledgement_batches=[
            SF.FetchTopic.FetchPartition.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
            for f, la, t in (acks or {}).get(p, [])]) for p in partitions])] if partitions else []
    body = dict(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=1,
                max_bytes=1 << 20, max_records=max_records, batch_size=max_records, topics=topics,
                forgotten_topics_data=[SF.ForgottenTopic(topic_id=tid, partitions=forget)] if forget else [])
    if version >= 2:
        body.update(share_acquire_mode=v2.get("mode", 0), is_renew_ack=v2.get("renew", False))
    return client.request(SF(**body), version)


def acknowledge(client, group, member, epoch, tid, batches, version=1, renew=False):
    A = SA.AcknowledgeTopic
    body = dict(group_id=group, member_id=member, share_session_epoch=epoch, topics=[A(topic_id=tid, partitions=[
        A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            A.AcknowledgePartition.AcknowledgementBatch(first_offset=f, last_offset=la, acknowledge_types=t)
            for f, la, t in batches])])])
    if version >= 2:
        body["is_renew_ack"] = renew
    return client.request(SA(**body), version)


def acquired(resp) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def partition(resp):
    (t,) = resp.responses
    (p,) = t.partitions
    return p


def test_fetch_acquires_and_acknowledgements_settle(server, client):
    """SharePartition.acquire (delivery count 1, lock of group.share.record.lock.duration.ms), then
    acknowledge piggybacked on the next ShareFetch: ACCEPT is never delivered again, RELEASE comes back
    with delivery count 2, REJECT never (SharePartition.acknowledge, InFlightState)."""
    group = "sf-basic"
    earliest(server, group)
    tid = topic_id(client)
    first = fetch(client, group, "m1", 0, tid, max_records=4)
    assert (first.error_code, first.acquisition_lock_timeout_ms) == (E.NONE, 30000)
    assert acquired(first) == [(0, 9, 1)]  # batch-optimized: the whole batch of 10 (acquire's batch mode)
    assert partition(first).records
    acks = {0: [(0, 3, [ACCEPT]), (4, 5, [RELEASE]), (6, 6, [REJECT]), (7, 9, [RELEASE])]}
    second = fetch(client, group, "m1", 1, tid, acks=acks)
    p = partition(second)
    assert (second.error_code, p.acknowledge_error_code) == (E.NONE, E.NONE)
    assert acquired(second) == [(4, 5, 2), (7, 9, 2)]
    third = fetch(client, group, "m1", 2, tid, acks={0: [(4, 5, [ACCEPT]), (7, 9, [ACCEPT])]})
    assert partition(third).acknowledge_error_code == E.NONE and acquired(third) == []


def test_acknowledge_errors(server, client):
    """SharePartition.acknowledge: offsets not acquired by the member are INVALID_RECORD_STATE (also when
    acknowledged twice), offsets past the acquired ones and unknown types INVALID_REQUEST; RENEW (type 4)
    only from v2 (KIP-1222)."""
    group = "sf-ack-errors"
    earliest(server, group)
    tid = topic_id(client)
    assert acquired(fetch(client, group, "a", 0, tid)) == [(0, 9, 1)]
    resp = acknowledge(client, group, "b", 0, tid, [(0, 0, [ACCEPT])])
    assert resp.error_code == E.INVALID_SHARE_SESSION_EPOCH  # acknowledgeSessionUpdate: epoch 0
    assert fetch(client, group, "b", 0, tid).error_code == E.NONE  # b's session; nothing left to acquire
    assert partition(acknowledge(client, group, "b", 1, tid, [(0, 0, [ACCEPT])])).error_code == E.INVALID_RECORD_STATE
    assert partition(acknowledge(client, group, "a", 1, tid, [(0, 20, [ACCEPT])])).error_code == E.INVALID_REQUEST
    assert partition(acknowledge(client, group, "a", 2, tid, [(0, 0, [7])])).error_code == E.INVALID_REQUEST
    assert partition(acknowledge(client, group, "a", 3, tid, [(0, 0, [RENEW])])).error_code == E.INVALID_REQUEST
    renewed = acknowledge(client, group, "a", 4, tid, [(0, 0, [RENEW])], version=2, renew=True)
    assert (partition(renewed).error_code, renewed.acquisition_lock_timeout_ms) == (E.NONE, 30000)
    assert partition(acknowledge(client, group, "a", 5, tid, [(1, 9, [ACCEPT])])).error_code == E.NONE
    again = acknowledge(client, group, "a", 6, tid, [(1, 1, [ACCEPT])])
    assert partition(again).error_code == E.INVALID_RECORD_STATE
    assert partition(acknowledge(client, group, "a", 7, tid, [(0, 0, [ACCEPT])])).error_code == E.NONE


def test_session_errors(server, client):
    """SharePartitionManager.newContext / acknowledgeSessionUpdate: no session SHARE_SESSION_NOT_FOUND,
    a wrong epoch INVALID_SHARE_SESSION_EPOCH, acknowledgements at epoch 0 INVALID_REQUEST, a final
    fetch that fetches INVALID_REQUEST; a final acknowledge closes the session."""
    group = "sf-sessions"
    tid = topic_id(client)
    assert fetch(client, group, "s1", 3, tid).error_code == E.SHARE_SESSION_NOT_FOUND
    assert fetch(client, group, "s1", -1, tid, partitions=()).error_code == E.SHARE_SESSION_NOT_FOUND
    assert fetch(client, group, "s1", 0, tid, acks={0: [(0, 0, [ACCEPT])]}).error_code == E.INVALID_REQUEST
    assert fetch(client, group, "s1", 0, tid).error_code == E.NONE
    assert fetch(client, group, "s1", 5, tid).error_code == E.INVALID_SHARE_SESSION_EPOCH
    assert fetch(client, group, "s1", -1, tid).error_code == E.INVALID_REQUEST
    assert fetch(client, group, "s1", 1, tid).error_code == E.NONE
    assert acknowledge(client, group, "s1", 3, tid, []).error_code == E.INVALID_SHARE_SESSION_EPOCH
    assert acknowledge(client, group, "s1", -1, tid, []).error_code == E.NONE
    assert acknowledge(client, group, "s1", 2, tid, []).error_code == E.SHARE_SESSION_NOT_FOUND
    assert fetch(client, group, "", 0, tid).error_code == E.INVALID_REQUEST


def test_session_limit(tmp_path):
    """ShareSessionCache.maybeCreateSession refuses past group.share.max.share.sessions (2 here):
    SHARE_SESSION_LIMIT_REACHED (Kafka 4.1+); a member's new session replaces its old one, and a closed
    session frees its slot."""
    srv = start_group_server(tmp_path, name="share-limit", overrides={"group.share.max.share.sessions": "2"})
    try:
        srv.create_topic(TOPIC, 1)
        with KafkaWireClient.connect(srv.bootstrap, timeout=30, client_id="share-limit") as client:
            tid = topic_id(client)
            assert [fetch(client, "sf-limit", f"l{i}", 0, tid).error_code for i in range(3)] == \
                [E.NONE, E.NONE, E.SHARE_SESSION_LIMIT_REACHED]
            assert fetch(client, "sf-limit", "l1", 0, tid).error_code == E.NONE  # replaces l1's session
            assert fetch(client, "sf-limit", "l0", -1, tid, partitions=()).error_code == E.NONE
            assert fetch(client, "sf-limit", "l2", 0, tid).error_code == E.NONE
    finally:
        srv.stop()


def test_final_epoch_releases_and_delivery_limit_archives(server, client):
    """A closed session releases what its member holds (SharePartition.releaseAcquiredRecords: delivery
    count taken back, KAFKA-17541); RELEASE past group.share.delivery.count.limit (3 here) archives
    (InFlightState.tryUpdateState)."""
    group = "sf-release"
    earliest(server, group)
    tid = topic_id(client)
    assert acquired(fetch(client, group, "r1", 0, tid)) == [(0, 9, 1)]
    assert fetch(client, group, "r1", -1, tid, partitions=()).error_code == E.NONE
    assert acquired(fetch(client, group, "r2", 0, tid)) == [(0, 9, 1)]
    for epoch, count in ((1, 2), (2, 3)):
        resp = fetch(client, group, "r2", epoch, tid, acks={0: [(0, 9, [RELEASE])]})
        assert acquired(resp) == [(0, 9, count)]
    resp = fetch(client, group, "r2", 3, tid, acks={0: [(0, 9, [RELEASE])]})
    assert partition(resp).acknowledge_error_code == E.NONE and acquired(resp) == []


def test_unknown_topic_and_record_limit(server, client):
    """A topic id this node does not know: UNKNOWN_TOPIC_ID for its partition (KafkaApis
    handleShareFetchRequest); v2's record_limit mode acquires exactly MaxRecords (KIP-1206)."""
    group = "sf-limit-mode"
    earliest(server, group)
    resp = fetch(client, group, "u1", 0, uuid.uuid4())
    assert partition(resp).error_code == E.UNKNOWN_TOPIC_ID
    tid = topic_id(client)
    resp = fetch(client, group, "u2", 0, tid, max_records=3, version=2, mode=1)
    assert acquired(resp) == [(0, 2, 1)]


def test_long_poll_wakes_on_produce(server, client):
    """A ShareFetch with nothing to acquire waits up to MaxWaitMs (DelayedShareFetch) and answers once
    records arrive."""
    import threading
    group = "sf-long-poll"  # share.auto.offset.reset latest: starts at the end
    tid = topic_id(client)
    assert acquired(fetch(client, group, "p1", 0, tid)) == []
    timer = threading.Timer(0.5, lambda: server.produce_keyed(TOPIC, 1, prefix="late-"))
    timer.start()
    try:
        resp = fetch(client, group, "p1", 1, tid, max_wait_ms=20000)
    finally:
        timer.join()
    assert [(f, la) for f, la, _c in acquired(resp)] and acquired(resp)[0][2] == 1


def test_find_coordinator_share_key(server, client):
    """FindCoordinator v6 key type 2 (share): "groupId:topicId:partition" (SharePartitionKey.asCoordinatorKey)
    answers this node; a key that does not parse is INVALID_REQUEST (SharePartitionKey.validate)."""
    import base64
    tid = topic_id(client)
    good = f"sf-coordinator:{base64.urlsafe_b64encode(tid.bytes).rstrip(b'=').decode()}:0"
    resp = client.request(m.FindCoordinatorRequest(key_type=2, coordinator_keys=[good, "no-colons", "g:zz:0"]), 6)
    answers = [(c.key, c.error_code, c.port) for c in resp.coordinators]
    port = int(server.bootstrap.rsplit(":", 1)[1])
    assert answers == [(good, E.NONE, port), ("no-colons", E.INVALID_REQUEST, -1), ("g:zz:0", E.INVALID_REQUEST, -1)]


def test_describe_share_group_offsets(server, client):
    """DescribeShareGroupOffsets (GroupCoordinatorService.describeShareGroupOffsets): the start offset and,
    from v1, the lag of each share-partition with state; StartOffset -1 for one without; an unknown group
    GROUP_ID_NOT_FOUND; an unknown topic UNKNOWN_TOPIC_OR_PARTITION."""
    D = m.DescribeShareGroupOffsetsRequest
    group = "sf-describe"
    earliest(server, group)
    tid = topic_id(client)
    joined = client.request(m.ShareGroupHeartbeatRequest(group_id=group, member_id="d1", member_epoch=0,
                                                         rack_id=None, subscribed_topic_names=[TOPIC]), 1)
    assert joined.error_code == E.NONE
    end = server.end_offsets(TOPIC, 1)[0]
    before = client.request(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1)
    assert [(g.group_id, g.error_code, g.topics) for g in before.groups] == [(group, E.NONE, [])]
    assert acquired(fetch(client, group, "d1", 0, tid))[0][:2] == (0, end - 1)
    assert partition(fetch(client, group, "d1", 1, tid, acks={0: [(0, 3, [ACCEPT])]})).acknowledge_error_code == 0
    req = D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),
                    D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=[
                        D.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=[0]),
                        D.DescribeShareGroupOffsetsRequestTopic(topic_name="no-such-topic", partitions=[0])]),
                    D.DescribeShareGroupOffsetsRequestGroup(group_id="sf-no-such-group", topics=None)])
    for version, lag in ((0, -1), (1, end - 4)):
        all_of, named, unknown = client.request(req, version).groups
        assert [(t.topic_name, t.topic_id, [(p.partition_index, p.start_offset, p.lag, p.error_code)
                                            for p in t.partitions]) for t in all_of.topics] == \
            [(TOPIC, tid, [(0, 4, lag, E.NONE)])]
        assert [[p.error_code for p in t.partitions] for t in named.topics] == [[E.NONE], [E.UNKNOWN_TOPIC_OR_PARTITION]]
        assert (unknown.error_code, unknown.topics) == (E.GROUP_ID_NOT_FOUND, [])


def test_alter_and_delete_share_group_offsets(tmp_path):
    """AlterShareGroupOffsets / DeleteShareGroupOffsets (GroupCoordinatorService.alterShareGroupOffsets /
    deleteShareGroupOffsets): only an empty share group (NON_EMPTY_GROUP), GROUP_ID_NOT_FOUND for an
    unknown one; a reset share-partition starts over at its offset, a deleted one from
    share.auto.offset.reset -- both durable across a restart."""
    A, D, X = m.AlterShareGroupOffsetsRequest, m.DeleteShareGroupOffsetsRequest, m.DescribeShareGroupOffsetsRequest
    group = "sf-admin"
    srv = start_group_server(tmp_path, name="share-admin")
    try:
        srv.create_topic(TOPIC, 1)
        srv.produce_keyed(TOPIC, 10)
        earliest(srv, group)

        def alter(client, offset, topic=TOPIC, grp=group):
            return client.request(A(group_id=grp, topics=[A.AlterShareGroupOffsetsRequestTopic(
                topic_name=topic, partitions=[A.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
                    partition_index=0, start_offset=offset)])]), 0)

        def start_offsets(client):
            (g,) = client.request(X(groups=[X.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1).groups
            return [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]) for t in g.topics]

        with KafkaWireClient.connect(srv.bootstrap, timeout=30, client_id="share-admin") as client:
            tid = topic_id(client)
            heartbeat = client.request(m.ShareGroupHeartbeatRequest(group_id=group, member_id="x1", member_epoch=0,
                                                                    rack_id=None, subscribed_topic_names=[TOPIC]), 1)
            assert acquired(fetch(client, group, "x1", 0, tid)) == [(0, 9, 1)]
            assert alter(client, 5).error_code == E.NON_EMPTY_GROUP
            assert alter(client, 5, grp="sf-no-such-group").error_code == E.GROUP_ID_NOT_FOUND
            client.request(m.ShareGroupHeartbeatRequest(group_id=group, member_id="x1", member_epoch=-1, rack_id=None,
                                                        subscribed_topic_names=None), 1)
            assert heartbeat.error_code == E.NONE
            resp = alter(client, 5)
            assert [(r.topic_name, r.topic_id, [(p.partition_index, p.error_code) for p in r.partitions])
                    for r in resp.responses] == [(TOPIC, tid, [(0, E.NONE)])]
            assert [p.error_code for r in alter(client, -3).responses for p in r.partitions] == [E.INVALID_REQUEST]
            assert [p.error_code for r in alter(client, 1, topic="nope").responses for p in r.partitions] == \
                [E.UNKNOWN_TOPIC_OR_PARTITION]
            assert start_offsets(client) == [(TOPIC, [(0, 5)])]
            # the reset's snapshot supersedes everything before it: __share_group_state was pruned up to it
            # (ShareCoordinatorShard's last redundant offset)
            from kcoord.share.records import share_state_partition
            from kcoord.tools import groups_cli
            state = ("__share_group_state", share_state_partition(group, tid, 0, 50))
            log_start = groups_cli.list_offsets(client, [state], groups_cli.EARLIEST)[state]
            assert 0 < log_start == groups_cli.list_offsets(client, [state], groups_cli.LATEST)[state] - 1
        srv.restart(signal.SIGKILL)
        with KafkaWireClient.connect(srv.bootstrap, timeout=30, client_id="share-admin") as client:
            assert start_offsets(client) == [(TOPIC, [(0, 5)])]
            assert acquired(fetch(client, group, "x2", 0, tid)) == [(5, 9, 1)]
            assert fetch(client, group, "x2", -1, tid, partitions=()).error_code == E.NONE
            resp = client.request(D(group_id=group, topics=[D.DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC),
                                                            D.DeleteShareGroupOffsetsRequestTopic(topic_name="nope")]), 0)
            assert [(r.topic_name, r.error_code) for r in resp.responses] == \
                [(TOPIC, E.NONE), ("nope", E.UNKNOWN_TOPIC_OR_PARTITION)]
            assert start_offsets(client) == []
        srv.restart(signal.SIGKILL)
        with KafkaWireClient.connect(srv.bootstrap, timeout=30, client_id="share-admin") as client:
            assert start_offsets(client) == []
            assert acquired(fetch(client, group, "x3", 0, tid)) == [(0, 9, 1)]  # earliest again
    finally:
        srv.stop()


def test_delete_groups_deletes_share_state(server, client):
    """DeleteGroups on an empty share group deletes its share-partitions' state first
    (GroupCoordinatorService.deleteGroups -> the persister's deleteState): the group, joined again, starts
    over from share.auto.offset.reset instead of its old start offset."""
    group = "sf-deleted"
    earliest(server, group)
    tid = topic_id(client)

    def join_and_leave():
        for epoch in (0, -1):
            resp = client.request(m.ShareGroupHeartbeatRequest(group_id=group, member_id="z1", member_epoch=epoch,
                                                               rack_id=None, subscribed_topic_names=[TOPIC]), 1)
            assert resp.error_code == E.NONE

    join_and_leave()
    first = acquired(fetch(client, group, "z1", 0, tid))
    assert first[0][:2] == (0, first[0][1]) and first[0][1] >= 9
    assert partition(fetch(client, group, "z1", 1, tid, acks={0: [(0, first[0][1], [ACCEPT])]})).acknowledge_error_code == 0
    assert fetch(client, group, "z1", -1, tid, partitions=()).error_code == E.NONE
    (result,) = client.request(m.DeleteGroupsRequest(groups_names=[group]), 2).results
    assert result.error_code == E.NONE
    join_and_leave()
    assert acquired(fetch(client, group, "z2", 0, tid)) == first  # the same records, delivered afresh


def test_renew_on_share_fetch_v2(server, client):
    """KIP-1222: a ShareFetch v2 with IsRenewAck carries RENEW acknowledgements and fetches nothing -- its
    MaxWaitMs, MinBytes, MaxBytes and MaxRecords must be 0 (INVALID_REQUEST otherwise); the renewed
    records stay acquired by the member (SharePartition.acknowledge, RENEW)."""
    group = "sf-renew"
    earliest(server, group)
    tid = topic_id(client)
    ((first, last, _count),) = acquired(fetch(client, group, "w1", 0, tid, version=2))
    assert first == 0 and last >= 9
    refused = fetch(client, group, "w1", 1, tid, version=2, renew=True, acks={0: [(0, last, [RENEW])]})
    assert refused.error_code == E.INVALID_REQUEST
    body = dict(group_id=group, member_id="w1", share_session_epoch=1, max_wait_ms=0, min_bytes=0, max_bytes=0,
                max_records=0, batch_size=0, share_acquire_mode=0, is_renew_ack=True, forgotten_topics_data=[],
                topics=[SF.FetchTopic(topic_id=tid, partitions=[SF.FetchTopic.FetchPartition(
                    partition_index=0, acknowledgement_batches=[SF.FetchTopic.FetchPartition.AcknowledgementBatch(
                        first_offset=0, last_offset=last, acknowledge_types=[RENEW])])])])
    renewed = client.request(SF(**body), 2)
    assert (renewed.error_code, partition(renewed).acknowledge_error_code, acquired(renewed)) == (E.NONE, E.NONE, [])
    other = fetch(client, group, "w2", 0, tid, version=2)
    assert acquired(other) == []  # still w1's
    assert partition(fetch(client, group, "w1", 2, tid, acks={0: [(0, last, [ACCEPT])]})).acknowledge_error_code == E.NONE


def test_start_offset_follows_the_log_start(tmp_path):
    """Records deleted below the share-partition's start offset (DeleteRecords, as retention would): the
    start offset moves to the log start offset, what was in flight there goes, and the share group goes on
    from the records that are left (SharePartition's start offset reset to the log start offset)."""
    srv = start_group_server(tmp_path, name="share-trimmed")
    try:
        srv.create_topic(TOPIC, 1)
        for prefix in ("a-", "b-"):  # two batches: DeleteRecords keeps whole segments, not batches
            srv.produce_keyed(TOPIC, 5, prefix=prefix)
        group = "sf-trimmed"
        earliest(srv, group)
        with KafkaWireClient.connect(srv.bootstrap, timeout=30, client_id="share-trimmed") as client:
            tid = topic_id(client)
            assert acquired(fetch(client, group, "t1", 0, tid))[0][:2] == (0, 9)
            assert partition(fetch(client, group, "t1", 1, tid, acks={0: [(0, 1, [ACCEPT])]})).acknowledge_error_code == 0
            D = m.DeleteRecordsRequest
            trimmed = client.request(D(topics=[D.DeleteRecordsTopic(name=TOPIC, partitions=[
                D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=6)])], timeout_ms=5000), 2)
            assert trimmed.topics[0].partitions[0].error_code == E.NONE
            assert fetch(client, group, "t1", -1, tid, partitions=()).error_code == E.NONE  # releases 2-9
            assert acquired(fetch(client, group, "t2", 0, tid)) == [(6, 9, 1)]
    finally:
        srv.stop()


def test_share_metrics(server, client):
    """Prometheus counters of share groups: deliveries (first and redeliveries), acknowledgements by type."""
    import urllib.request
    group = "sf-metrics"
    earliest(server, group)
    tid = topic_id(client)
    ((first, last, _c),) = acquired(fetch(client, group, "q1", 0, tid))
    acks = {0: [(first, first, [RELEASE]), (first + 1, first + 1, [REJECT]), (first + 2, last, [ACCEPT])]}
    assert acquired(fetch(client, group, "q1", 1, tid, acks=acks)) == [(first, first, 2)]
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
    lines = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
             if line.startswith("kcoord_share_") and f'group="{group}"' in line}
    def value(name, **labels):
        return next(v for k, v in lines.items() if k.startswith(name) and all(f'{a}="{b}"' in k for a, b in labels.items()))
    assert value("kcoord_share_deliveries_total", redelivery="False") == last - first + 1
    assert value("kcoord_share_deliveries_total", redelivery="True") == 1
    assert (value("kcoord_share_acknowledgements_total", type="release"),
            value("kcoord_share_acknowledgements_total", type="reject"),
            value("kcoord_share_acknowledgements_total", type="accept")) == (1, 1, last - first - 1)


def test_auto_offset_reset_by_duration(server, client):
    """share.auto.offset.reset=by_duration:PT1H starts a share-partition at the first record no older than an
    hour (ShareGroupConfig's by_duration; the offset for a timestamp as ListOffsets finds it)."""
    import time

    from confluent_kafka import Producer
    topic, group = "share-timed", "sf-by-duration"
    server.create_topic(topic, 1)
    now = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, timestamp=now - 2 * 3600_000 if i < 4 else now)
    assert producer.flush(30) == 0
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="share-fetch-admin")
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, group,
                                            configs={"share.auto.offset.reset": "by_duration:PT1H"})])
    finally:
        admin.close()
    md = client.request(m.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    tid = next(t.topic_id for t in md.topics if t.name == topic)
    assert acquired(fetch(client, group, "b1", 0, tid)) == [(4, 9, 1)]


def test_more_request_errors(server, client):
    """KafkaApis.handleShareFetchRequest: no MemberId, or a ShareAcquireMode other than 0 / 1 (KIP-1206),
    INVALID_REQUEST for the request; a partition the topic does not have UNKNOWN_TOPIC_OR_PARTITION
    (ReplicaManager.getPartitionOrError); SharePartitionManager.acknowledge on a share-partition that
    has no state UNKNOWN_TOPIC_OR_PARTITION."""
    group = "sf-more-errors"
    tid = topic_id(client)
    assert fetch(client, group, "", 0, tid).error_code == E.INVALID_REQUEST
    assert fetch(client, group, "e1", 0, tid, version=2, mode=7).error_code == E.INVALID_REQUEST
    resp = fetch(client, group, "e1", 0, tid, partitions=(0, 9))
    assert {p.partition_index: p.error_code for t in resp.responses for p in t.partitions} == \
        {0: E.NONE, 9: E.UNKNOWN_TOPIC_OR_PARTITION}
    assert fetch(client, "sf-other-group", "e2", 0, tid, partitions=()).error_code == E.NONE
    assert partition(acknowledge(client, "sf-other-group", "e2", 1, tid, [(0, 0, [ACCEPT])])).error_code == \
        E.UNKNOWN_TOPIC_OR_PARTITION
