"""SyncGroup: per-state answers, the leader's assignment, store_group, pending-sync expiry."""
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.testing import CoordinatorContext
from kcoord.protocol.consumer_offsets import decode_group_metadata_value, decode_key
from kcoord.protocol.errors import ErrorCode as E

S = GroupState


def _completing(ctx, n=2):
    caps = [ctx.join_new_member("g", client_id=f"c{i}") for i in range(n)]
    ctx.sleep(6000)
    results = [c.result for c in caps]
    leader = results[0].leader_id
    return leader, [r.member_id for r in results if r.member_id != leader]


def test_unknown_group_and_empty_group_id(ctx):
    assert ctx.sync("nope", "m", 1).result.error == E.UNKNOWN_MEMBER_ID
    assert ctx.sync("", "m", 1).result.error == E.INVALID_GROUP_ID


def test_guards_in_order(ctx):
    leader, follower = ctx.stable_group("g", 2)
    assert ctx.sync("g", "ghost", 1).result.error == E.UNKNOWN_MEMBER_ID
    assert ctx.sync("g", follower, 7).result.error == E.ILLEGAL_GENERATION
    assert ctx.sync("g", follower, 1, protocol_type="connect").result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.sync("g", follower, 1, protocol_name="sticky").result.error == E.INCONSISTENT_GROUP_PROTOCOL
    ok = ctx.sync("g", follower, 1, protocol_type="consumer", protocol_name="range").result
    assert ok.error == E.NONE and ok.assignment == follower.encode()


def test_followers_wait_for_the_leader_and_each_gets_only_its_own_assignment(ctx):
    leader, (follower,) = _completing(ctx)
    f = ctx.sync("g", follower, 1)
    assert not f.called
    lead = ctx.sync("g", leader, 1, {leader: b"L", follower: b"F"})
    assert lead.result.assignment == b"L" and f.result.assignment == b"F"
    assert f.result.protocol_type == "consumer" and f.result.protocol_name == "range"
    assert ctx.groups["g"].is_(S.STABLE)


def test_members_missing_from_leader_assignment_get_empty_bytes_and_stranger_ids_are_ignored(ctx):
    leader, (follower,) = _completing(ctx)
    f = ctx.sync("g", follower, 1)
    ctx.sync("g", leader, 1, {leader: b"L", "stranger": b"S"})
    assert f.result.error == E.NONE and f.result.assignment == b""
    key, value, headers = ctx.writer.records[-1]
    gm = decode_group_metadata_value(value)
    assert decode_key(key).group == "g"
    assert {m.member_id: m.assignment for m in gm.members} == {leader: b"L", follower: b""}


def test_response_only_after_write_is_durable_and_store_failure_rebalances(ctx):
    leader, (follower,) = _completing(ctx)
    ctx.writer.auto = False
    f = ctx.sync("g", follower, 1)
    lead = ctx.sync("g", leader, 1, {leader: b"L", follower: b"F"})
    assert not lead.called and not f.called
    assert ctx.groups["g"].is_(S.COMPLETING_REBALANCE)
    ctx.writer.fail_all(E.NOT_LEADER_OR_FOLLOWER)
    assert lead.result.error == E.NOT_COORDINATOR and f.result.error == E.NOT_COORDINATOR
    assert lead.result.assignment == b""
    g = ctx.groups["g"]
    assert g.is_(S.PREPARING_REBALANCE) and g.rebalance.cause == "store_failure"


def test_completed_write_after_a_new_rebalance_does_not_propagate(ctx):
    leader, (follower,) = _completing(ctx)
    ctx.writer.auto = False
    lead = ctx.sync("g", leader, 1, {leader: b"L", follower: b"F"})
    ctx.join("g", follower, protocols=[("range", b"changed")])  # -> PreparingRebalance
    assert lead.result.error == E.REBALANCE_IN_PROGRESS
    ctx.writer.complete_all()
    assert ctx.groups["g"].is_(S.PREPARING_REBALANCE)


def test_preparing_rebalance_and_empty_answers(ctx):
    leader, follower = ctx.stable_group("g", 2)
    ctx.join("g", leader)
    assert ctx.sync("g", follower, 1).result.error == E.REBALANCE_IN_PROGRESS


def test_pending_sync_expiry_removes_members_that_never_synced(ctx):
    leader, (follower,) = _completing(ctx)
    lead = ctx.sync("g", leader, 1, {leader: b"L", follower: b"F"})
    assert lead.result.error == E.NONE
    for _ in range(11):  # both heartbeat (heartbeating is not syncing) until the rebalance timeout
        assert ctx.heartbeat("g", follower, 1) == E.NONE
        assert ctx.heartbeat("g", leader, 1) == E.NONE
        ctx.sleep(5000)
    assert ctx.groups["g"].is_(S.STABLE)
    assert ctx.heartbeat("g", leader, 1) == E.NONE
    ctx.sleep(4999)
    assert ctx.groups["g"].is_(S.STABLE)
    ctx.sleep(1)  # 60 s (the rebalance timeout) after the join completed
    g = ctx.groups["g"]
    assert follower not in g.members and leader in g.members
    assert g.is_(S.PREPARING_REBALANCE) and g.rebalance.cause == "sync_timeout"


def test_dead_group_answers_coordinator_not_available(ctx):
    leader, = ctx.stable_group("g", 1)
    g = ctx.groups["g"]
    g.transition_to(S.DEAD, 0)
    assert ctx.sync("g", leader, 1).result.error == E.COORDINATOR_NOT_AVAILABLE
    assert ctx.heartbeat("g", leader, 1) == E.COORDINATOR_NOT_AVAILABLE
    assert ctx.join("g", leader).result.error == E.COORDINATOR_NOT_AVAILABLE
    assert ctx.join("g").result.error == E.COORDINATOR_NOT_AVAILABLE


def test_rebalance_headers_on_the_record_that_completes_a_generation():
    ctx = CoordinatorContext()
    leader, (follower,) = _completing(ctx)
    ctx.sleep(700)
    ctx.sync("g", leader, 1, {})
    _, _, headers = ctx.writer.records[-1]
    h = {k: v.decode() for k, v in headers}
    assert h == {"kcoord.rebalance.cause": "initial_join",
                 "kcoord.rebalance.reason": h["kcoord.rebalance.reason"],
                 "kcoord.rebalance.trigger_member": h["kcoord.rebalance.trigger_member"],
                 "kcoord.rebalance.start_ms": "1700000000000",
                 "kcoord.rebalance.join_ms": "6000", "kcoord.rebalance.sync_ms": "700"}
    assert h["kcoord.rebalance.reason"].startswith("Adding new member")


def test_group_becoming_empty_writes_empty_record_with_headers(ctx):
    leader, = ctx.stable_group("g", 1)
    ctx.writer.clear()
    ctx.leave("g", (leader, None, "shutting down"))
    ctx.sleep(0)
    g = ctx.groups["g"]
    assert g.is_(S.EMPTY) and g.generation_id == 2
    (key, value, headers), = ctx.writer.records
    gm = decode_group_metadata_value(value)
    assert gm.members == [] and gm.protocol is None and gm.leader is None and gm.generation == 2
    h = dict(headers)
    assert h["kcoord.rebalance.cause"] == b"member_left" and h["kcoord.rebalance.sync_ms"] == b"0"


def test_group_store_that_never_completes_times_out_into_a_rebalance(ctx):
    leader, (follower,) = _completing(ctx)
    ctx.writer.auto = False
    f = ctx.sync("g", follower, 1)
    lead = ctx.sync("g", leader, 1, {leader: b"L", follower: b"F"})
    ctx.sleep(5000)  # offsets.commit.timeout.ms
    assert lead.result.error == f.result.error == E.COORDINATOR_NOT_AVAILABLE
    g = ctx.groups["g"]
    assert g.is_(S.PREPARING_REBALANCE) and g.rebalance.cause == "store_failure"
