"""Timer control through the admin endpoint and `kcoord groups expire-member | fire-timers | run-retention`
(GroupRuntime.expire_member / fire_group_timers / run_offset_retention, docs/CONTRACTS.md), over real TCP.

What each one stands for follows Kafka's classic group coordinator (GroupCoordinator.scala /
GroupMetadataManager.java): a member whose session expires is removed and the group rebalances
(onExpireHeartbeat -> removeMemberAndUpdateGroup); the initial rebalance delay and the rebalance timeout
complete the join phase (InitialDelayedJoin / DelayedJoin expiry); a generation whose members do not all
SyncGroup within the rebalance timeout drops them (pending-sync expiry); offset retention tombstones
expired offsets (cleanupGroupMetadata)."""
from __future__ import annotations

import time
import urllib.request

import pytest

from kcoord.broker.admin_client import AdminClient, AdminRequestError
from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode
from tests.broker.test_admin_faults import ADMIN, kcoord_cli

JOIN_V = 3  # before KIP-394: the first JoinGroup gets a member id and joins at once


def join(client, group, member_id="", rebalance_timeout_ms=60000, session_timeout_ms=30000):
    proto = m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00")
    return m.JoinGroupRequest(group_id=group, session_timeout_ms=session_timeout_ms,
                              rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
                              protocol_type="test", protocols=[proto])


def sync(group, generation, member_id, assignments=()):
    return m.SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id, assignments=[
        m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=b"a") for mid in assignments])


def describe(client, group):
    return client.request(m.DescribeGroupsRequest(groups=[group]), 5).groups[0]


def rebalances(server, cause):
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith("kcoord_group_rebalances_total{") and f'cause="{cause}"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


@pytest.fixture
def server(kcoord_server_factory):
    return loaded(kcoord_server_factory(ADMIN))


def loaded(server):
    """The ready line comes before __consumer_offsets is loaded; group requests answer LOAD_IN_PROGRESS
    until it is."""
    server.wait_for_log(r"loaded \d+ __consumer_offsets partitions")
    return server


@pytest.fixture
def admin(server):
    return AdminClient(f"http://127.0.0.1:{server.admin_port}")


def stable_group_of_one(client, group):
    joined = client.request(join(client, group), JOIN_V)
    assert joined.error_code == 0
    assert client.request(sync(group, joined.generation_id, joined.member_id, [joined.member_id]), 3).error_code == 0
    return joined


def test_expire_member_from_the_cli_rebalances_with_cause_session_timeout(server):
    with KafkaWireClient.connect(server.bootstrap) as client:
        member = stable_group_of_one(client, "g").member_id
        assert describe(client, "g").group_state == "Stable"
        out = kcoord_cli("groups", "expire-member", "g", member, admin_port=server.admin_port)
        assert out.returncode == 0 and out.stdout == f"member {member} of group g expired\n"
        group = describe(client, "g")  # at once: no waiting out the 30 s session
        assert (group.group_state, group.members) == ("Empty", [])
        heartbeat = m.HeartbeatRequest(group_id="g", member_id=member, generation_id=1)
        assert client.request(heartbeat, 4).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert rebalances(server, "session_timeout") == 1
    server.wait_for_log(rf"Member {member} in group g has failed, removing it from the group")
    server.wait_for_log(r"Preparing to rebalance group g .*reason: removing member .* on heartbeat expiration")
    missing = kcoord_cli("groups", "expire-member", "g", member, admin_port=server.admin_port)
    assert missing.returncode == 1 and "404" in missing.stderr


def test_expire_one_of_two_members_the_other_rejoins(server, admin):
    with KafkaWireClient.connect(server.bootstrap) as a, KafkaWireClient.connect(server.bootstrap) as b:
        first = stable_group_of_one(a, "pair")
        b.send(join(b, "pair"), JOIN_V)  # parks: the group rebalances for it and waits for `first`
        hb = m.HeartbeatRequest(group_id="pair", member_id=first.member_id, generation_id=1)
        deadline = time.monotonic() + 10
        while a.request(hb, 4).error_code != ErrorCode.REBALANCE_IN_PROGRESS:  # once b's join is in
            assert time.monotonic() < deadline
            time.sleep(0.02)
        admin.timers.expire_member("pair", first.member_id)  # `first` will never rejoin: its session ends
        second = b.receive()
        assert second.error_code == 0 and second.leader == second.member_id and second.generation_id == 2
        assert [mm.member_id for mm in second.members] == [second.member_id]


def test_fire_timers_ends_the_join_phase_at_the_rebalance_timeout(server, admin):
    """DelayedJoin's expiry (Kafka: GroupCoordinator.onCompleteJoin after the rebalance timeout): members
    that did not rejoin are dropped and the join completes with those that did."""
    with KafkaWireClient.connect(server.bootstrap) as a, KafkaWireClient.connect(server.bootstrap) as b:
        first = stable_group_of_one(a, "slowpoke")  # then never rejoins
        b.send(join(b, "slowpoke"), JOIN_V)
        hb = m.HeartbeatRequest(group_id="slowpoke", member_id=first.member_id, generation_id=1)
        deadline = time.monotonic() + 10
        while a.request(hb, 4).error_code != ErrorCode.REBALANCE_IN_PROGRESS:  # b's join is in
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert admin.timers.fire("slowpoke") == 1  # not the 60 s rebalance timeout
        second = b.receive()
        assert second.error_code == 0 and second.generation_id == 2
        assert [mm.member_id for mm in second.members] == [second.member_id]
        assert a.request(hb, 4).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_fire_timers_completes_the_initial_rebalance_delay(kcoord_server_factory):
    server = loaded(kcoord_server_factory({**ADMIN, "group.initial.rebalance.delay.ms": "60000"}))
    admin = AdminClient(f"http://127.0.0.1:{server.admin_port}")
    with KafkaWireClient.connect(server.bootstrap) as client, KafkaWireClient.connect(server.bootstrap) as look:
        client.send(join(client, "slow"), JOIN_V)
        time.sleep(0.2)
        assert describe(look, "slow").group_state == "PreparingRebalance"  # parked for 60 s
        out = kcoord_cli("groups", "fire-timers", "slow", admin_port=server.admin_port)
        assert out.returncode == 0 and out.stdout.endswith("timers of group slow fired\n")
        joined = client.receive()
        assert joined.error_code == 0 and joined.generation_id == 1
        assert describe(look, "slow").group_state == "CompletingRebalance"
        # the join completed, so the pending-sync timer (rebalance timeout) is armed now: firing it drops
        # the member that never sent SyncGroup, and the group rebalances
        assert admin.timers.fire("slow") == 1
        group = describe(look, "slow")
        assert group.members == [] and group.group_state in ("PreparingRebalance", "Empty")
    assert rebalances(server, "sync_timeout") == 1
    assert admin.timers.fire("no-such-group") == 0


def test_run_retention_tombstones_expired_offsets(server):
    topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
    part = m.OffsetCommitRequest.OffsetCommitRequestPartition
    commit = m.OffsetCommitRequest(group_id="old", generation_id_or_member_epoch=-1, member_id="",
                                   retention_time_ms=1, topics=[topic(name="t", partitions=[
                                       part(partition_index=0, committed_offset=42)])])
    with KafkaWireClient.connect(server.bootstrap) as client:
        client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="t")],
                                         allow_auto_topic_creation=True), 9)  # creates it
        assert client.request(commit, 2).topics[0].partitions[0].error_code == 0
        fetch = m.OffsetFetchRequest(group_id="old", topics=None)
        assert [p.committed_offset for t in client.request(fetch, 7).topics for p in t.partitions] == [42]
        time.sleep(0.01)  # past its 1 ms retention; the periodic check would run in 10 minutes
        out = kcoord_cli("groups", "run-retention", admin_port=server.admin_port)
        assert out.returncode == 0 and out.stdout == "offset retention ran: 2 records written\n"  # offset + group
        assert client.request(fetch, 7).topics == []
    with pytest.raises(AdminRequestError):
        AdminClient(f"http://127.0.0.1:{server.admin_port}").request("POST", "/offsets/run-retention", [1])
