"""Heartbeat, LeaveGroup and static membership."""
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.testing import CoordinatorContext
from kcoord.protocol.errors import ErrorCode as E

S = GroupState


def test_heartbeat_per_state(ctx):
    assert ctx.heartbeat("nope", "m", 1) == E.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat("", "m", 1) == E.INVALID_GROUP_ID
    a = ctx.join_new_member("g", client_id="a")
    b = ctx.join_new_member("g", client_id="b")
    ctx.sleep(6000)
    m = a.result.member_id
    assert ctx.heartbeat("g", m, 1) == E.NONE                      # CompletingRebalance
    assert ctx.heartbeat("g", m, 0) == E.ILLEGAL_GENERATION
    assert ctx.heartbeat("g", "ghost", 1) == E.UNKNOWN_MEMBER_ID
    ctx.sync("g", a.result.leader_id, 1, {})
    ctx.sync("g", b.result.member_id if b.result.member_id != a.result.leader_id else m, 1)
    assert ctx.heartbeat("g", m, 1) == E.NONE                      # Stable
    ctx.join("g", a.result.leader_id)
    assert ctx.heartbeat("g", m, 1) == E.REBALANCE_IN_PROGRESS     # PreparingRebalance


def test_heartbeats_keep_a_member_alive_and_silence_expires_it(ctx):
    leader, follower = ctx.stable_group("g", 2)
    for _ in range(5):
        ctx.sleep(9000)
        assert ctx.heartbeat("g", leader, 1) == E.NONE
        assert ctx.heartbeat("g", follower, 1) == E.NONE
    g = ctx.groups["g"]
    assert g.is_(S.STABLE) and follower in g.members
    ctx.sleep(9000)
    assert ctx.heartbeat("g", leader, 1) == E.NONE
    ctx.sleep(1000)  # follower silent for 10 s = its session timeout
    assert ctx.heartbeat("g", leader, 1) == E.REBALANCE_IN_PROGRESS
    assert follower not in ctx.groups["g"].members  # silent for 45 s > 10 s session
    g = ctx.groups["g"]
    assert g.rebalance.cause == "session_timeout" and g.rebalance.trigger_member == follower


def test_session_expiry_writes_the_exact_records(ctx):
    leader, = ctx.stable_group("g", 1)
    ctx.writer.clear()
    ctx.sleep(10_000)  # session expires -> rebalance -> nobody left -> Empty generation 2
    (key, value, headers), = ctx.writer.records
    from kcoord.protocol.consumer_offsets import GroupMetadataKey, decode_group_metadata_value, decode_key
    assert decode_key(key) == GroupMetadataKey("g")
    v = decode_group_metadata_value(value)
    assert (v.generation, v.protocol, v.leader, v.members) == (2, None, None, [])
    assert dict(headers)["kcoord.rebalance.cause"] == b"session_timeout"


def test_leave_group_single_batch_and_by_instance_id(ctx):
    a = ctx.join("g", instance_id="i-a", client_id="a")
    b = ctx.join_new_member("g", client_id="b")
    c = ctx.join_new_member("g", client_id="c")
    ctx.sleep(6000)
    ids = [x.result.member_id for x in (a, b, c)]
    res = ctx.leave("g", (ids[1], None, "bye"), ("", "i-a", None), ("", "i-unknown", None),
                    ("ghost", None, None), ("wrong-id", "i-zzz", None))
    assert [r.error for r in res.members] == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID,
                                              E.UNKNOWN_MEMBER_ID]
    g = ctx.groups["g"]
    assert list(g.members) == [ids[2]] and "i-a" not in g.static_members
    assert g.is_(S.PREPARING_REBALANCE)
    assert ctx.leave("nope", ("m", None, None)).error == E.UNKNOWN_MEMBER_ID


def test_leave_of_a_pending_member_and_fenced_instance(ctx):
    pending = ctx.join("g").result.member_id
    s = ctx.join("g", instance_id="i-1")
    ctx.sleep(3000)
    res = ctx.leave("g", (pending, None, None), ("old-id", "i-1", None))
    assert [r.error for r in res.members] == [E.NONE, E.FENCED_INSTANCE_ID]
    assert not ctx.groups["g"].pending_members
    assert s.result.member_id in ctx.groups["g"].members


def test_leave_during_preparing_rebalance_completes_the_join(ctx):
    leader, follower = ctx.stable_group("g", 2)
    lj = ctx.join("g", leader)
    assert not lj.called
    ctx.leave("g", (follower, None, None))
    assert lj.result.error == E.NONE and lj.result.generation_id == 2


def _static_stable(ctx, n=2, version=9):
    caps = [ctx.join("g", instance_id=f"i{k}", client_id=f"c{k}", version=version) for k in range(n)]
    ctx.sleep(6000)
    res = [c.result for c in caps]
    leader = res[0].leader_id
    ctx.sync("g", leader, 1, {r.member_id: f"A{k}".encode() for k, r in enumerate(res)}, instance_id="i0")
    for k, r in enumerate(res[1:], 1):
        ctx.sync("g", r.member_id, 1, instance_id=f"i{k}")
    assert ctx.groups["g"].is_(S.STABLE)
    return [r.member_id for r in res]


def test_static_follower_restart_without_rebalance_and_old_id_fenced(ctx):
    old_leader, old_follower = _static_stable(ctx)
    ctx.writer.clear()
    r = ctx.join("g", instance_id="i1", client_id="c1").result
    g = ctx.groups["g"]
    assert r.error == E.NONE and r.member_id != old_follower and r.generation_id == 1
    assert g.is_(S.STABLE) and g.generation_id == 1
    assert len(ctx.writer.records) == 1  # the replacement is persisted, no rebalance
    assert g.get(r.member_id).assignment == b"A1"
    assert ctx.heartbeat("g", old_follower, 1, "i1") == E.FENCED_INSTANCE_ID
    assert ctx.sync("g", old_follower, 1, instance_id="i1").result.error == E.FENCED_INSTANCE_ID
    assert ctx.join("g", old_follower, instance_id="i1").result.error == E.FENCED_INSTANCE_ID
    assert ctx.heartbeat("g", r.member_id, 1, "i1") == E.NONE
    assert ctx.sync("g", r.member_id, 1, instance_id="i1").result.assignment == b"A1"


def test_static_leader_restart_skip_assignment_on_v9_only(ctx):
    old_leader, follower = _static_stable(ctx)
    r9 = ctx.join("g", instance_id="i0", client_id="c0", version=9).result
    assert r9.skip_assignment is True and r9.leader_id == r9.member_id and len(r9.members) == 2
    r8 = ctx.join("g", instance_id="i0", client_id="c0", version=8).result
    # before v9 the answer names the previous leader id, so the client acts as a follower
    assert r8.skip_assignment is False and r8.leader_id == r9.member_id != r8.member_id and r8.members == []
    assert ctx.groups["g"].is_(S.STABLE)


def test_static_restart_that_changes_the_vote_rebalances(ctx):
    both = [("range", b""), ("roundrobin", b"")]
    rr_first = [("roundrobin", b""), ("range", b"")]
    caps = [ctx.join("g", instance_id=f"i{k}", client_id=f"c{k}", protocols=p)
            for k, p in enumerate([both, rr_first, rr_first])]
    ctx.sleep(6000)
    res = [c.result for c in caps]
    assert res[0].protocol_name == "roundrobin"  # 2 votes to 1
    for k, r in enumerate(res):
        ctx.sync("g", r.member_id, 1, {x.member_id: b"" for x in res} if r.member_id == r.leader_id else {},
                 instance_id=f"i{k}")
    g = ctx.groups["g"]
    assert g.is_(S.STABLE)
    same = ctx.join("g", instance_id="i1", client_id="c1", protocols=rr_first)
    assert same.result.error == E.NONE and g.is_(S.STABLE)  # vote unchanged: no rebalance
    ctx.join("g", instance_id="i1", client_id="c1", protocols=both)  # now range wins 2 to 1
    assert g.is_(S.PREPARING_REBALANCE) and g.rebalance.cause == "static_member_update"
    assert ctx.join("g", instance_id="i2", client_id="c2", protocols=[("sticky", b"")]).result.error == \
        E.INCONSISTENT_GROUP_PROTOCOL


def test_requests_to_an_empty_group_from_members(ctx):
    leader, = ctx.stable_group("g", 1)
    ctx.leave("g", (leader, None, None))
    g = ctx.groups["g"]
    assert g.is_(S.EMPTY)
    assert ctx.heartbeat("g", leader, 2) == E.UNKNOWN_MEMBER_ID
    assert ctx.sync("g", leader, 2).result.error == E.UNKNOWN_MEMBER_ID
    assert ctx.leave("g", (leader, None, None)).members[0].error == E.UNKNOWN_MEMBER_ID
    assert ctx.join("g", leader).result.error == E.UNKNOWN_MEMBER_ID


def test_static_restart_into_full_group_keeps_the_mapping():
    ctx = CoordinatorContext(group_max_size=1)
    first = ctx.join("g", instance_id="i0")
    ctx.sleep(3000)
    m = first.result.member_id
    ctx.sync("g", m, 1, {m: b"A"}, instance_id="i0")
    # the same instance restarting with an unknown member id is not counted as an existing member
    assert ctx.join("g", instance_id="i0").result.error == E.GROUP_MAX_SIZE_REACHED
    assert ctx.groups["g"].static_members == {"i0": m}
    assert ctx.heartbeat("g", m, 1, "i0") == E.NONE


def test_static_replacement_write_failure_reverts(ctx):
    old_leader, old_follower = _static_stable(ctx)
    ctx.writer.auto_error = E.REQUEST_TIMED_OUT
    r = ctx.join("g", instance_id="i1", client_id="c1").result
    assert r.error == E.COORDINATOR_NOT_AVAILABLE and r.member_id == ""
    g = ctx.groups["g"]
    assert g.static_members["i1"] == old_follower and old_follower in g.members


def test_static_member_rejoin_during_completing_rebalance_rebalances_and_fences_parked_sync(ctx):
    caps = [ctx.join("g", instance_id=f"i{k}", client_id=f"c{k}") for k in range(2)]
    ctx.sleep(6000)
    follower = caps[1].result.member_id
    parked = ctx.sync("g", follower, 1, instance_id="i1")
    ctx.join("g", instance_id="i1", client_id="c1")
    assert parked.result.error == E.FENCED_INSTANCE_ID
    assert ctx.groups["g"].is_(S.PREPARING_REBALANCE)
    assert ctx.groups["g"].rebalance.cause == "static_member_update"


def test_join_v0_uses_session_timeout_as_rebalance_timeout():
    ctx = CoordinatorContext()
    cap = ctx.join("g", version=0, session_timeout_ms=7000, rebalance_timeout_ms=999_999)
    ctx.sleep(3000)
    g = ctx.groups["g"]
    assert cap.result.error == E.NONE and g.get(cap.result.member_id).rebalance_timeout_ms == 7000


def test_static_leader_that_does_not_rejoin_stays_but_leadership_moves(ctx):
    leader, follower = _static_stable(ctx)
    fj = ctx.join("g", follower, instance_id="i1", protocols=[("range", b"changed")])
    while not fj.called:  # the static leader keeps its session but never rejoins
        assert ctx.heartbeat("g", leader, 1, "i0") == E.REBALANCE_IN_PROGRESS
        ctx.sleep(5000)
    g = ctx.groups["g"]
    assert leader in g.members and g.leader_id == follower
    assert fj.result.leader_id == follower and len(fj.result.members) == 2


def test_rebalance_waits_again_when_nobody_rejoined(ctx):
    a, b = _static_stable(ctx)
    ctx.leave("g", (a, "i0", "bye"))  # Stable -> PreparingRebalance; b is static and never rejoins
    g = ctx.groups["g"]
    for _ in range(13):  # 65 s: the 60 s rebalance timeout passes without anyone joined
        assert ctx.heartbeat("g", b, 1, "i1") == E.REBALANCE_IN_PROGRESS
        ctx.sleep(5000)
    assert g.is_(S.PREPARING_REBALANCE) and g.generation_id == 1 and b in g.members
    late = ctx.join("g", b, instance_id="i1")
    assert late.result.error == E.NONE and late.result.generation_id == 2  # all (one) joined: completes


def test_static_restart_during_preparing_rebalance_parks_with_the_others(ctx):
    leader, follower = _static_stable(ctx)
    lj = ctx.join("g", leader, instance_id="i0")
    new = ctx.join("g", instance_id="i1", client_id="c1")
    assert lj.result.error == E.NONE and new.result.error == E.NONE  # both in: the join completes
    assert new.result.member_id != follower and new.result.generation_id == 2
    assert ctx.groups["g"].static_members["i1"] == new.result.member_id


def test_the_log_says_why_a_session_timeout_rebalanced(ctx, caplog):
    import logging
    leader, follower = ctx.stable_group("g", 2)
    with caplog.at_level(logging.INFO, logger="kcoord.coordinator"):
        ctx.sleep(5000)
        ctx.heartbeat("g", leader, 1)
        ctx.sleep(5000)
    msgs = [r.getMessage() for r in caplog.records]
    failed = msgs.index(f"Member {follower} in group g has failed, removing it from the group")
    assert f"(reason: removing member {follower} on heartbeat expiration)" in msgs[failed + 1]
    assert msgs[failed + 1].startswith("Preparing to rebalance group g in state PreparingRebalance "
                                       "with old generation 1")
    assert ctx.events.rebalances[-1] == ("g", "session_timeout")  # the event sink hears the cause too


def test_e2e_silent_leader_holds_a_rebalance_only_until_its_session_timeout(ctx):
    """The e2e benchmark's stuck kafka-python leader: after its SyncGroup it sends nothing (the client
    lost its own join). As in Kafka, the new members' rebalance waits for it only until its session
    expires, not for the 300 s rebalance timeout kafka-python sends, and completes without it."""
    kw = {"session_timeout_ms": 6000, "rebalance_timeout_ms": 300_000}
    leader, = ctx.stable_group("g", 1, **kw)
    g = ctx.groups["g"]
    joins = [ctx.join_new_member("g", client_id=f"n{i}", **kw) for i in range(2)]
    assert g.is_(S.PREPARING_REBALANCE) and not any(j.called for j in joins)
    ctx.sleep(5999)
    assert not any(j.called for j in joins), "a live leader could still rejoin"
    ctx.sleep(1)
    results = [j.result for j in joins]
    assert [r.error for r in results] == [E.NONE, E.NONE]
    assert {r.generation_id for r in results} == {2} and leader not in g.members
    assert g.is_(S.COMPLETING_REBALANCE) and g.leader_id in {r.member_id for r in results}
    assert ctx.heartbeat("g", leader, 1) == E.UNKNOWN_MEMBER_ID  # what it would hear if it spoke


def test_static_member_replaced_after_heartbeats_expires_under_its_new_id(ctx):
    """A member's session-expiry timer is made once and reused by every heartbeat; a static member's
    replacement takes over the same member object under a new id, so the timer must follow the id."""
    old_leader, old_follower = _static_stable(ctx)
    for _ in range(3):
        ctx.sleep(5000)
        assert ctx.heartbeat("g", old_leader, 1, "i0") == E.NONE
        assert ctx.heartbeat("g", old_follower, 1, "i1") == E.NONE
    new_follower = ctx.join("g", instance_id="i1", client_id="c1").result.member_id
    assert new_follower != old_follower
    assert ctx.heartbeat("g", new_follower, 1, "i1") == E.NONE
    for _ in range(3):  # only the leader keeps beating; the replaced follower goes silent
        ctx.sleep(5000)
        assert ctx.heartbeat("g", old_leader, 1, "i0") in (E.NONE, E.REBALANCE_IN_PROGRESS)
    g = ctx.groups["g"]
    assert new_follower not in g.members
    assert g.rebalance.cause == "session_timeout" and g.rebalance.trigger_member == new_follower
