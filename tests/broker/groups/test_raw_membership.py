"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup over the wire, at several versions, against the real
server: our wire client and codecs, no client library in between."""
from __future__ import annotations

import itertools

import pytest

from kcoord.protocol.errors import ErrorCode as E
from kcoord.testkit.waiting import wait_until
from tests.broker.groups.rawgroup import Member, assignment, subscription

_ids = itertools.count()


@pytest.fixture
def members(server):
    opened = []

    def make(join_version: int, group: str, **kwargs) -> Member:
        member = Member(server.bootstrap, group, join_version, **kwargs)
        opened.append(member)
        return member

    yield make
    for member in opened:
        member.close()


def group_name(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


def form_group(members, version: int, group: str, count: int = 2, **kwargs) -> list[Member]:
    """Members join (adopting MEMBER_ID_REQUIRED ids where the version asks) and sync once; the first
    to be answered as leader hands each member partition [i]."""
    group_members = [members(version, group, **kwargs) for _ in range(count)]
    if version >= 4 and "instance_id" not in kwargs:
        for member in group_members:
            assert member.join().error_code == E.MEMBER_ID_REQUIRED
    for member in group_members:
        member.send_join()
    responses = [member.receive_join() for member in group_members]
    assert [r.error_code for r in responses] == [E.NONE] * count
    leader = next(mm for mm, r in zip(group_members, responses, strict=True) if r.leader == mm.member_id)
    plan = {mm.member_id: assignment([i]) for i, mm in enumerate(group_members)}
    for member in group_members:
        if member is not leader:
            member.send_sync()
    leader.send_sync(plan)
    for member in group_members:
        resp = member.client.receive()
        assert resp.error_code == E.NONE
        assert resp.assignment == plan[member.member_id]
    return group_members


@pytest.mark.parametrize("version", [4, 5, 9])
def test_member_id_required_then_join(members, version):
    member = members(version, group_name("kip394"))
    first = member.join()
    assert first.error_code == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("raw-dyn-")  # Kafka's "<client id>-<uuid>"
    second = member.join()
    assert second.error_code == E.NONE
    assert second.member_id == first.member_id
    assert second.generation_id == 1
    assert second.leader == first.member_id
    assert [mm.member_id for mm in second.members] == [first.member_id]
    assert second.members[0].metadata == subscription()


@pytest.mark.parametrize("version", [0, 3])
def test_old_versions_join_without_member_id_round_trip(members, version):
    member = members(version, group_name("old"))
    resp = member.join()
    assert resp.error_code == E.NONE
    assert resp.member_id and resp.leader == resp.member_id
    assert resp.protocol_name == "range"
    sync = member.sync({member.member_id: assignment([0])})
    assert sync.error_code == E.NONE and sync.assignment == assignment([0])
    assert member.heartbeat() == E.NONE


@pytest.mark.parametrize("version", [0, 3, 5, 9])
def test_leader_gets_members_followers_get_only_their_assignment(members, version):
    group = group_name("roles")
    a, b = members(version, group), members(version, group)
    if version >= 4:
        assert a.join().error_code == E.MEMBER_ID_REQUIRED
        assert b.join().error_code == E.MEMBER_ID_REQUIRED
    a.send_join()
    b.send_join()
    ra, rb = a.receive_join(), b.receive_join()
    assert ra.error_code == rb.error_code == E.NONE
    assert ra.generation_id == rb.generation_id
    assert ra.leader == rb.leader
    leader, follower = (a, b) if ra.leader == a.member_id else (b, a)
    leader_resp, follower_resp = (ra, rb) if leader is a else (rb, ra)
    assert sorted(mm.member_id for mm in leader_resp.members) == sorted([a.member_id, b.member_id])
    assert follower_resp.members == []
    if version >= 7:
        assert leader_resp.protocol_type == "consumer"

    follower.send_sync()  # parked until the leader's assignment is stored
    leader.send_sync({leader.member_id: assignment([0, 1]), follower.member_id: assignment([2])})
    follower_sync, leader_sync = follower.client.receive(), leader.client.receive()
    assert follower_sync.error_code == leader_sync.error_code == E.NONE
    assert follower_sync.assignment == assignment([2])
    assert leader_sync.assignment == assignment([0, 1])
    assert leader.heartbeat() == follower.heartbeat() == E.NONE


@pytest.mark.parametrize("version", [3, 5])
def test_heartbeat_during_rebalance_then_generation_and_member_errors(members, version):
    group = group_name("hb")
    a, b = form_group(members, version, group)
    c = members(version, group)
    if version >= 4:
        assert c.join().error_code == E.MEMBER_ID_REQUIRED
    c.send_join()  # parked: once the server has it, the group is PreparingRebalance
    wait_until(lambda: a.heartbeat() == E.REBALANCE_IN_PROGRESS, 10, "a heartbeat told to rejoin")
    assert b.heartbeat() == E.REBALANCE_IN_PROGRESS
    old_generation = a.generation_id
    a.send_join()
    b.send_join()
    responses = [c.receive_join(), a.receive_join(), b.receive_join()]
    assert {r.error_code for r in responses} == {E.NONE}
    assert {r.generation_id for r in responses} == {old_generation + 1}
    assert a.heartbeat(generation_id=old_generation) == E.ILLEGAL_GENERATION
    assert a.heartbeat(member_id="nobody-" + a.member_id) == E.UNKNOWN_MEMBER_ID


def test_join_v0_rebalance_timeout_is_the_session_timeout(members):
    """v0 has no RebalanceTimeoutMs: the session timeout stands in (KAFKA-8653: a rebalance timeout
    of 0 would complete the join at once and drop every member that had not rejoined yet)."""
    group = group_name("v0")
    a = members(0, group, session_timeout_ms=20_000)
    assert a.join().error_code == E.NONE
    assert a.sync({a.member_id: assignment([0])}).error_code == E.NONE
    b = members(0, group, session_timeout_ms=20_000)
    b.send_join()
    # The join phase waits (up to a's session timeout) for a to rejoin; a is still a member meanwhile.
    wait_until(lambda: a.heartbeat() == E.REBALANCE_IN_PROGRESS, 10, "a told to rejoin")
    a.send_join()
    ra, rb = a.receive_join(), b.receive_join()
    assert (ra.error_code, rb.error_code) == (E.NONE, E.NONE)
    assert ra.generation_id == rb.generation_id == 2
    leader_resp = ra if ra.leader == a.member_id else rb
    assert sorted(mm.member_id for mm in leader_resp.members) == sorted([a.member_id, b.member_id])


@pytest.mark.parametrize("leave_version", [0, 1, 3, 5])
def test_leave_group_moves_on_at_once(members, leave_version):
    join_version = 5 if leave_version >= 3 else 3
    group = group_name("leave")
    a, b = form_group(members, join_version, group)
    resp = b.leave(leave_version)
    assert resp.error_code == E.NONE
    if leave_version >= 3:
        assert [(mm.member_id, mm.error_code) for mm in resp.members] == [(b.member_id, E.NONE)]
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    rejoin = a.join()
    assert rejoin.error_code == E.NONE
    assert [mm.member_id for mm in rejoin.members] == [a.member_id]
    again = b.leave(leave_version)  # no longer a member
    if leave_version >= 3:
        assert [mm.error_code for mm in again.members] == [E.UNKNOWN_MEMBER_ID]
    else:
        assert again.error_code == E.UNKNOWN_MEMBER_ID


def test_static_member_restart_keeps_generation_and_fences_old_id(members):
    group = group_name("static")
    s1, s2 = _static_pair(members, group)  # s1 leads
    generation = s1.generation_id
    old_id = s2.member_id
    stored = s2.sync().assignment  # a late SyncGroup in Stable returns the stored assignment
    restarted = members(5, group, instance_id=s2.instance_id)
    resp = restarted.join()
    assert resp.error_code == E.NONE
    assert resp.generation_id == generation  # no rebalance
    assert resp.member_id != old_id
    assert resp.members == []
    sync = restarted.sync()
    assert sync.error_code == E.NONE
    assert sync.assignment == stored
    assert s2.heartbeat() == E.FENCED_INSTANCE_ID  # the old incarnation is fenced
    assert s1.heartbeat() == E.NONE and restarted.heartbeat() == E.NONE


def test_skip_assignment_only_on_v9(members):
    group = group_name("skip")
    s1, _s2 = _static_pair(members, group)
    leader_before = s1.member_id
    generation = s1.generation_id
    # A static leader restarting on v5: told the old leader id, so it acts as a follower.
    v5 = members(5, group, instance_id=s1.instance_id)
    resp = v5.join()
    assert resp.error_code == E.NONE and resp.generation_id == generation
    assert resp.leader == leader_before != resp.member_id
    assert resp.members == []
    # The same on v9: it is the leader again, gets the members, and is told to skip assigning.
    v9 = members(9, group, instance_id=s1.instance_id)
    resp = v9.join()
    assert resp.error_code == E.NONE and resp.generation_id == generation
    assert resp.skip_assignment is True
    assert resp.leader == resp.member_id
    assert sorted(mm.group_instance_id for mm in resp.members) == ["i-1", "i-2"]
    assert sorted(mm.member_id for mm in resp.members) == sorted([resp.member_id, _s2.member_id])


def _static_pair(members, group) -> tuple[Member, Member]:
    """Two static members in a Stable group: (leader, follower)."""
    s1 = members(5, group, instance_id="i-1")
    s2 = members(5, group, instance_id="i-2")
    s1.send_join()
    s2.send_join()
    r1, r2 = s1.receive_join(), s2.receive_join()
    assert r1.error_code == r2.error_code == E.NONE  # static members never get MEMBER_ID_REQUIRED
    leader, follower = (s1, s2) if r1.leader == s1.member_id else (s2, s1)
    follower.send_sync()
    leader.send_sync({s1.member_id: assignment([0]), s2.member_id: assignment([1])})
    assert follower.client.receive().error_code == E.NONE
    assert leader.client.receive().error_code == E.NONE
    return leader, follower


def test_sync_v5_requires_protocol_type_and_name(members):
    group = group_name("sync5")
    member = members(9, group)
    member.join()
    assert member.join().error_code == E.NONE
    resp = member.sync({member.member_id: b""}, protocol_type=None, protocol_name=None)
    assert resp.error_code == E.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("version,expected_name", [(5, ""), (6, ""), (7, None), (9, None)])
def test_join_error_response_protocol_name(members, version, expected_name):
    member = members(version, group_name("err"), session_timeout_ms=10)  # below the minimum
    resp = member.join()
    assert resp.error_code == E.INVALID_SESSION_TIMEOUT
    assert resp.protocol_name == expected_name
