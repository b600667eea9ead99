"""Random sequences of requests and time: the group's bookkeeping stays consistent throughout."""
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.testing import CoordinatorContext
from kcoord.protocol.errors import ErrorCode as E

S = GroupState
CLIENTS = ["a", "b", "c", "s1", "s2"]  # s* are static

ops = st.lists(st.tuples(st.sampled_from(["join", "rejoin", "sync", "heartbeat", "leave", "sleep", "commit"]),
                         st.sampled_from(CLIENTS), st.integers(0, 3)), max_size=40)


def check_invariants(ctx):
    for g in ctx.groups.values():
        members = g.members
        assert g.num_members_awaiting_join == sum(m.is_awaiting_join for m in members.values())
        # a member waits exactly when the group manager's table holds its parked request
        waiting = {mid for mid, m in members.items() if m.is_awaiting_join or m.is_awaiting_sync}
        assert waiting == set(ctx.manager(g.group_id).parked.members_waiting(g.group_id))
        assert (g.leader_id in members) if members else g.leader_id is None
        assert all(mid in members for mid in g.static_members.values())
        assert all(m.group_instance_id in g.static_members for m in members.values() if m.is_static_member)
        assert g.pending_sync_members <= set(members)
        assert not (g.pending_members & set(members))
        want = Counter()
        for m in members.values():
            want.update(m.protocols())
        assert +g.supported_protocols == want
        if g.is_(S.EMPTY):
            assert not members
        if g.state in (S.COMPLETING_REBALANCE, S.STABLE):
            assert members and g.protocol_name in g.candidate_protocols()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_bookkeeping_is_consistent_under_random_traffic(steps):
    ctx = CoordinatorContext()
    known: dict[str, str] = {}  # client -> its member id
    generation: dict[str, int] = {}
    joins = {}  # client -> its latest JoinGroup capture
    for op, client, arg in steps:
        static = client.startswith("s")
        instance = client if static else None
        protocols = [("range", b"r"), ("rr", b"x")] if arg % 2 else [("rr", b"y"), ("range", b"r")]
        if op in ("join", "rejoin"):
            member_id = known.get(client, "") if op == "rejoin" else ""
            cap = ctx.join("g", member_id, instance_id=instance, client_id=client, protocols=protocols)
            if cap.called and cap.result.error == E.MEMBER_ID_REQUIRED:
                known[client] = cap.result.member_id
                cap = ctx.join("g", cap.result.member_id, client_id=client, protocols=protocols)
            joins[client] = cap
        elif op == "sleep":
            ctx.sleep([0, 1000, 3000, 15_000][arg])
        elif client in known:
            mid, gen = known[client], generation.get(client, 0)
            if op == "sync":
                ctx.sync("g", mid, gen, {m: b"x" for m in known.values()}, instance_id=instance)
            elif op == "heartbeat":
                ctx.heartbeat("g", mid, gen, instance)
            elif op == "leave":
                ctx.leave("g", (mid, instance, "random"))
            elif op == "commit":
                ctx.commit_offsets("g", mid, instance, gen, [P("t", arg, 1)], lambda _r: None)
        for c, cap in joins.items():
            if cap.called and cap.calls[-1].error == E.NONE:
                known[c] = cap.calls[-1].member_id
                generation[c] = cap.calls[-1].generation_id
        check_invariants(ctx)
