"""JoinGroup: front-door checks, MEMBER_ID_REQUIRED, initial delay, DelayedJoin, voting, leaders."""
import logging

from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.testing import CoordinatorContext
from kcoord.protocol.errors import ErrorCode as E

S = GroupState


def test_empty_group_id_is_invalid(ctx):
    assert ctx.join("").result.error == E.INVALID_GROUP_ID


def test_session_timeout_bounds(ctx):
    assert ctx.join("g", session_timeout_ms=5999).result.error == E.INVALID_SESSION_TIMEOUT
    assert ctx.join("g", session_timeout_ms=1_800_001).result.error == E.INVALID_SESSION_TIMEOUT
    assert ctx.join("g", session_timeout_ms=6000).result.error == E.MEMBER_ID_REQUIRED


def test_known_member_id_for_unknown_group_is_unknown_member(ctx):
    assert ctx.join("nope", "m-1").result.error == E.UNKNOWN_MEMBER_ID
    assert "nope" not in ctx.groups


def test_member_id_required_from_v4_and_id_is_client_id_dash_uuid(ctx):
    r = ctx.join("g", client_id="app").result
    assert r.error == E.MEMBER_ID_REQUIRED
    assert r.member_id.startswith("app-") and len(r.member_id) == len("app-") + 36
    assert ctx.groups["g"].pending_members == {r.member_id}
    # before v4 the member is added at once
    r3 = ctx.join("g3", version=3)
    assert not r3.called
    assert len(ctx.groups["g3"].members) == 1


def test_static_member_never_gets_member_id_required(ctx):
    cap = ctx.join("g", instance_id="i-1")
    assert not cap.called
    ctx.sleep(3000)
    assert cap.result.error == E.NONE and cap.result.member_id.startswith("i-1-")


def test_pending_member_expires_after_session_timeout(ctx):
    r = ctx.join("g", session_timeout_ms=10_000).result
    ctx.sleep(9_999)
    assert ctx.groups["g"].is_pending_member(r.member_id)
    ctx.sleep(1)
    assert not ctx.groups["g"].is_pending_member(r.member_id)
    assert ctx.join("g", r.member_id).result.error == E.UNKNOWN_MEMBER_ID


def test_pending_member_expiry_lets_a_waiting_rebalance_complete(ctx):
    leader, follower = ctx.stable_group("g", 2)
    g = ctx.groups["g"]
    pending = ctx.join("g").result.member_id  # MEMBER_ID_REQUIRED, never comes back
    lj = ctx.join("g", leader)                 # leader rejoin -> rebalance
    fj = ctx.join("g", follower)
    assert g.is_(S.PREPARING_REBALANCE) and not lj.called  # waits for the pending member
    ctx.sleep(10_000)
    assert not g.is_pending_member(pending)
    assert lj.result.error == E.NONE and fj.result.error == E.NONE
    assert lj.result.generation_id == 2


def test_initial_delay_single_member_waits_the_delay(ctx):
    cap = ctx.join_new_member("g")
    ctx.sleep(2999)
    assert not cap.called
    ctx.sleep(1)
    assert cap.result.error == E.NONE and cap.result.generation_id == 1


def test_initial_delay_extended_while_members_arrive_and_capped_by_rebalance_timeout():
    ctx = CoordinatorContext(group_initial_rebalance_delay_ms=3000)
    first = ctx.join_new_member("g", rebalance_timeout_ms=10_000)
    # a new member every 2.5 s keeps extending the wait; the rebalance timeout (10 s) caps it
    caps = [first]
    for i in range(5):
        ctx.sleep(2500)
        if first.called:
            break
        caps.append(ctx.join_new_member("g", client_id=f"x{i}", rebalance_timeout_ms=10_000))
    # timeline: windows end at 3000, 6000, 9000 (remaining 7000 -> 4000 -> 1000), then min(3000, 1000) -> 10000
    assert first.called
    assert ctx.clock.now_ms() - 1_700_000_000_000 == 10_000
    assert {c.result.generation_id for c in caps} == {1}


def test_initial_delay_extension_timeline_exact():
    ctx = CoordinatorContext(group_initial_rebalance_delay_ms=3000)
    a = ctx.join_new_member("g", rebalance_timeout_ms=60_000)
    ctx.sleep(1000)
    b = ctx.join_new_member("g", client_id="b", rebalance_timeout_ms=60_000)
    ctx.sleep(1999)
    assert not a.called
    ctx.sleep(1)                           # 3000: b arrived -> extend by 3000
    assert not a.called
    ctx.sleep(2999)
    assert not a.called
    ctx.sleep(1)                           # 6000: nobody new -> complete
    assert a.result.generation_id == b.result.generation_id == 1


def test_group_max_size_per_state():
    ctx = CoordinatorContext(group_max_size=2)
    leader, follower = ctx.stable_group("g", 2)
    # Stable: a new member over capacity is rejected, known members are accepted
    assert ctx.join("g").result.error == E.GROUP_MAX_SIZE_REACHED
    assert ctx.join("g", follower).result.error == E.NONE
    # PreparingRebalance: counted by members awaiting join
    lj = ctx.join("g", leader)
    assert ctx.groups["g"].is_(S.PREPARING_REBALANCE)
    assert ctx.join("g").result.error == E.MEMBER_ID_REQUIRED  # 1 awaiting < 2
    fj = ctx.join("g", follower)
    assert ctx.join("g").result.error == E.GROUP_MAX_SIZE_REACHED  # 2 awaiting
    ctx.sleep(10_000)
    assert lj.result.error == E.NONE and fj.result.error == E.NONE
    # CompletingRebalance: counted by members
    assert ctx.groups["g"].is_(S.COMPLETING_REBALANCE)
    assert ctx.join("g").result.error == E.GROUP_MAX_SIZE_REACHED
    # Empty: always accepted
    ctx2 = CoordinatorContext(group_max_size=1)
    assert ctx2.join("h").result.error == E.MEMBER_ID_REQUIRED


def test_delayed_join_completes_early_when_all_rejoin(ctx):
    ids = ctx.stable_group("g", 3)
    caps = [ctx.join("g", m) for m in ids]
    assert all(c.called for c in caps)  # no timer needed: the last rejoin completed the phase
    assert {c.result.generation_id for c in caps} == {2}


def test_dynamic_members_dropped_at_rebalance_timeout_static_kept():
    ctx = CoordinatorContext()
    a = ctx.join("g", instance_id="s1", client_id="a", rebalance_timeout_ms=20_000)
    b = ctx.join_new_member("g", client_id="b", rebalance_timeout_ms=20_000)
    c = ctx.join("g", instance_id="s2", client_id="c", rebalance_timeout_ms=20_000)
    ctx.sleep(6000)
    res = {x.result.member_id: x.result for x in (a, b, c)}
    leader = a.result.leader_id
    ctx.sync("g", leader, 1, {m: b"x" for m in res})
    for m in res:
        if m != leader:
            ctx.sync("g", m, 1)
    g = ctx.groups["g"]
    assert g.is_(S.STABLE)
    # only the leader rejoins; the dynamic follower b and the static c do not
    rejoin = ctx.join("g", a.result.member_id, instance_id="s1", rebalance_timeout_ms=20_000)
    # b and c keep heartbeating (told to rejoin) but never rejoin: only the rebalance timeout acts
    for _ in range(3):
        ctx.sleep(5000)
        assert ctx.heartbeat("g", c.result.member_id, 1, "s2") == E.REBALANCE_IN_PROGRESS
        assert ctx.heartbeat("g", b.result.member_id, 1) == E.REBALANCE_IN_PROGRESS
    assert not rejoin.called
    ctx.sleep(5000)
    assert rejoin.result.error == E.NONE and rejoin.result.generation_id == 2
    assert b.result.member_id not in g.members
    assert c.result.member_id in g.members and g.static_members["s2"] == c.result.member_id


def test_protocol_vote_with_three_members(ctx):
    a = ctx.join_new_member("g", client_id="a", protocols=[("range", b"A"), ("roundrobin", b"a"), ("sticky", b"1")])
    b = ctx.join_new_member("g", client_id="b", protocols=[("roundrobin", b"b"), ("range", b"B")])
    c = ctx.join_new_member("g", client_id="c", protocols=[("roundrobin", b"c"), ("sticky", b"2"), ("range", b"C")])
    ctx.sleep(6000)
    assert a.result.protocol_name == "roundrobin"  # votes: range 1, roundrobin 2 (sticky not a candidate)
    leader = a.result  # first member added leads
    assert leader.leader_id == a.result.member_id
    assert sorted(m.metadata for m in leader.members) == [b"a", b"b", b"c"]
    assert b.result.members == [] and c.result.members == []


def test_inconsistent_protocol(ctx):
    ctx.stable_group("g", 1)
    assert ctx.join("g", protocols=[("other", b"")]).result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.join("g", protocol_type="connect").result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.join("h", protocols=[]).result.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_leader_reelected_when_leader_does_not_rejoin(ctx):
    leader, f1, f2 = ctx.stable_group("g", 3)
    c1 = ctx.join("g", f1, protocols=[("range", b"new")])  # changed metadata -> rebalance
    c2 = ctx.join("g", f2)
    # the leader keeps heartbeating but never rejoins; it is dropped at the rebalance timeout
    while not c1.called:
        assert ctx.heartbeat("g", leader, 1) == E.REBALANCE_IN_PROGRESS
        ctx.sleep(5000)
    g = ctx.groups["g"]
    assert ctx.clock.now_ms() - 1_700_000_006_000 == 60_000
    assert leader not in g.members and g.generation_id == 2
    assert g.leader_id in (f1, f2)
    assert c1.result.leader_id == c2.result.leader_id == g.leader_id
    lead, follow = (c1, c2) if g.leader_id == f1 else (c2, c1)
    assert len(lead.result.members) == 2 and follow.result.members == []


def test_stable_follower_rejoin_unchanged_returns_current_generation(ctx):
    leader, follower = ctx.stable_group("g", 2)
    r = ctx.join("g", follower).result
    assert r.error == E.NONE and r.generation_id == 1 and r.members == [] and r.leader_id == leader
    assert ctx.groups["g"].is_(S.STABLE)


def test_completing_rebalance_rejoin_same_metadata_gets_generation_leader_gets_members(ctx):
    a = ctx.join_new_member("g", client_id="a")
    b = ctx.join_new_member("g", client_id="b")
    ctx.sleep(6000)
    r = ctx.join("g", a.result.member_id).result
    assert r.error == E.NONE and r.generation_id == 1 and len(r.members) == 2
    assert ctx.join("g", b.result.member_id).result.members == []


def test_new_member_join_timeout_expires_parked_join():
    ctx = CoordinatorContext(new_member_join_timeout_ms=5000)
    leader, = ctx.stable_group("g", 1, rebalance_timeout_ms=600_000)
    # leader rejoins, a new member joins; the leader's session keeps... the new member is parked
    newbie = ctx.join_new_member("g", client_id="n", rebalance_timeout_ms=600_000)
    assert not newbie.called
    ctx.sleep(5000)
    assert newbie.result.error == E.UNKNOWN_MEMBER_ID


def test_rebalance_reason_is_logged(ctx, caplog):
    with caplog.at_level(logging.INFO, logger="kcoord.coordinator"):
        leader, follower = ctx.stable_group("g", 2)
        ctx.join("g", leader, reason="topic metadata changed")
    msgs = [r.getMessage() for r in caplog.records]
    assert any("Preparing to rebalance group g in state PreparingRebalance with old generation 1" in m
               and "topic metadata changed" in m for m in msgs)
    assert any("Stabilized group g generation 1" in m and "with 2 members" in m for m in msgs)
