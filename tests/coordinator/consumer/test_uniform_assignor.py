"""The uniform assignor for members with one subscription (Kafka's UniformHomogeneousAssignmentBuilder
and UniformAssignorTest): balanced, sticky, deterministic; and its incremental join gives exactly what
the full computation gives, without computing in full (counted, never timed)."""
from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.consumer.assignors import AssignmentMemberSpec
from kcoord.coordinator.consumer.assignors import uniform_homogeneous as h
from kcoord.coordinator.consumer.assignors.uniform import UniformAssignor
from kcoord.protocol.errors import ErrorCode as E

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def specs(ids, topics=(T1, T2)):
    spec = AssignmentMemberSpec(None, None, frozenset(topics))
    return dict.fromkeys(ids, spec)


def sizes(result):
    return sorted(sum(len(p) for p in a.values()) for a in result.values())


def owners(result):
    out = {}
    for m, a in result.items():
        for t, ps in a.items():
            for p in ps:
                assert (t, p) not in out, f"{t}-{p} given twice"
                out[(t, p)] = m
    return out


def test_first_member_gets_everything_and_the_second_takes_the_upper_half():
    """testOneMemberSubscribedToTwoTopics; the joining member takes the partitions the first one gives up,
    the highest (Kafka's tests pin no order; ours is the lowest kept, the rest moved)."""
    a = UniformAssignor()
    first = a.assign(specs(["a"]), {T1: 6}, {})
    assert first == {"a": {T1: frozenset(range(6))}}
    second = a.assign(specs(["a", "b"]), {T1: 6}, first)
    assert second == {"a": {T1: frozenset({0, 1, 2})}, "b": {T1: frozenset({3, 4, 5})}}


def test_extra_partitions_stay_with_members_that_hold_them():
    """Balance first, then stickiness: of 7 partitions over 3 members, the one extra stays where it is."""
    a = UniformAssignor()
    current = {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3, 4})}, "c": {T1: frozenset({5, 6})}}
    assert a.assign(specs(["a", "b", "c"], [T1]), {T1: 7}, current) == current


def test_unsubscribed_and_vanished_partitions_are_dropped():
    a = UniformAssignor()
    current = {"a": {T1: frozenset({0, 1, 9}), T2: frozenset({0})}}
    assert a.assign(specs(["a", "b"], [T1]), {T1: 4}, current) == {"a": {T1: frozenset({0, 1})},
                                                                   "b": {T1: frozenset({2, 3})}}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=40, unique=True),
       st.integers(0, 30), st.integers(0, 30))
def test_joins_one_by_one_equal_the_full_computation(ids, p1, p2):
    """After every join: the remembered, incremental answer == a fresh full computation, balanced (sizes
    differ by at most one), every partition given once, and no member but the newcomer gains one."""
    topics = {T1: p1, T2: p2}
    incremental = UniformAssignor()
    result: dict = {}
    for n in range(1, len(ids) + 1):
        members = specs(ids[:n])
        before = result
        result = incremental.assign(members, topics, before)
        fresh = UniformAssignor().assign(members, topics, before)
        assert result == fresh
        assert len(owners(result)) == p1 + p2
        assert sizes(result)[-1] - sizes(result)[0] <= 1
        for m in ids[:n - 1]:
            assert all(ps <= before[m].get(t, frozenset()) for t, ps in result[m].items()), "only the newcomer gains"


def test_a_join_is_incremental_and_touches_only_the_members_it_takes_from(monkeypatch):
    """1,000 members join a 1,000-partition group one at a time: one full computation (the first), then
    each join changes only the newcomer and the members it takes a partition from."""
    calls = []
    real_full = h.full
    monkeypatch.setattr(h, "full", lambda *a: calls.append(1) or real_full(*a))
    assignor = UniformAssignor()
    topics = {T1: 1000}
    result: dict = {}
    for n in range(1, 1001):
        ids = [f"m{i:04d}" for i in range(n)]
        before = result
        result = assignor.assign(specs(ids, [T1]), topics, before)
        changed = [m for m in ids if result[m] is not before.get(m)]
        newcomer_count = len(result[ids[-1]].get(T1, ()))
        assert len(changed) <= newcomer_count + 1
    assert len(calls) == 1
    assert sizes(result) == [1] * 1000


def test_two_subscriptions_balance_without_moving_partitions_around():
    """Half the members on one topic, half on it and another of the same size: the topic fewer members
    take goes first, so the fill alone balances (every member 2 x partitions / members)."""
    ids = [f"m{i:03d}" for i in range(100)]
    one = AssignmentMemberSpec(None, None, frozenset({T1}))
    both = AssignmentMemberSpec(None, None, frozenset({T1, T2}))
    members = {m: both if i % 2 else one for i, m in enumerate(ids)}
    result = UniformAssignor().assign(members, {T1: 1000, T2: 1000}, {})
    assert sizes(result) == [20] * 100 and len(owners(result)) == 2000
    assert all(T2 not in result[m] for i, m in enumerate(ids) if i % 2 == 0)


def test_the_group_tells_the_assignor_when_every_member_subscribes_alike():
    """Kafka's SubscriptionType from the per-topic subscriber counts (ModernGroup.subscriptionType): one
    subscription for all -> the assignor is told it (and reads no member spec); a member changing its
    subscription, or subscribing by regex, makes the group heterogeneous; a member never gets a topic it
    does not subscribe to."""
    from kcoord.coordinator.consumer.target import _common_subscription
    from kcoord.coordinator.consumer.testing import ConsumerGroupContext

    ctx = ConsumerGroupContext(topics={"foo": 4, "bar": 2})
    a = ctx.heartbeat("g", "a", 0, topics=["foo", "bar"])
    ctx.heartbeat("g", "b", 0, topics=["bar", "foo"])
    group = ctx.consumer_group("g")
    assert _common_subscription(group, dict(group.members), None, None) == {"foo", "bar"}
    changed = group.members["b"].replace(subscribed_topic_names=frozenset({"foo"}))
    assert _common_subscription(group, {**group.members, "b": changed}, changed, None) is None
    regex = group.members["b"].replace(subscribed_topic_regex="f.*")
    assert _common_subscription(group, {**group.members, "b": regex}, regex, None) is None
    only_foo = ctx.heartbeat("g", "b", 2, topics=["foo"])
    assert only_foo.error == 0 and ctx.topic_id("bar") not in (only_foo.assignment or {})
    assert ctx.topic_id("bar") in ctx.consumer_group("g").target_assignment["a"] and a.error == 0


def _token_hits(monkeypatch) -> list[bool]:
    """Records, for each lookup of a previous step (Memory._find), whether it was found by its token."""
    hits: list[bool] = []
    real_find = h.Memory._find

    def find(self, key, member_ids, current, joining, token):
        out = real_find(self, key, member_ids, current, joining, token)
        hits.append(out is not None and token is not None and out[1].token is token)
        return out

    monkeypatch.setattr(h.Memory, "_find", find)
    return hits


def test_joins_through_the_group_find_their_step_by_its_token(monkeypatch):
    """In a forming group each join finds the previous step by the token its records gave the group (no
    comparison of every member's target), and the result is what comparing would give (VERIFY_TOKENS)."""
    from kcoord.coordinator.consumer.testing import ConsumerGroupContext

    found = _token_hits(monkeypatch)
    ctx = ConsumerGroupContext({"t": 50})
    for _ in range(20):
        ctx.heartbeat("g", "", 0, topics=["t"])
    assert found[0] is False and all(found[2:]), found  # the first join computes in full; then by token
    group = ctx.consumer_group("g")
    assert sizes(group.target_assignment) == [2] * 10 + [3] * 10


def test_tokens_after_static_rejoins_leaves_and_partition_changes(monkeypatch):
    """Joins between a static member's rejoin (it inherits its target), a member leaving, and a partition
    count change: every target found by its token is the current one (VERIFY_TOKENS compares), joins after
    each event find their step by token again, and the targets stay balanced."""
    from kcoord.coordinator.consumer.testing import ConsumerGroupContext

    by_token = _token_hits(monkeypatch)  # (conftest.py sets VERIFY_TOKENS for every test here)
    ctx = ConsumerGroupContext({"t": 30})
    static = ctx.heartbeat("g", "", 0, topics=["t"], instance_id="i1")
    dynamic = [ctx.heartbeat("g", "", 0, topics=["t"]) for _ in range(4)]
    assert ctx.heartbeat("g", static.member_id, -2, instance_id="i1").error == E.NONE
    ctx.heartbeat("g", "", 0, topics=["t"], instance_id="i1")  # a new member id inherits i1's target
    assert ctx.heartbeat("g", dynamic[0].member_id, -1).error == E.NONE  # leaves
    for _ in range(3):
        ctx.heartbeat("g", "", 0, topics=["t"])
    ctx.add_topic("t", 40)
    for _ in range(3):
        ctx.heartbeat("g", "", 0, topics=["t"])
    # after each full computation (the first join, a rejoin's inherited target, the leave, the new partition
    # count) the next join compares, and the ones after it find their step by token
    assert by_token == [False, False, True, True, True, False, False, True, False, False, True], by_token
    group = ctx.consumer_group("g")
    assert sizes(group.target_assignment)[-1] - sizes(group.target_assignment)[0] <= 1
    assert sum(sizes(group.target_assignment)) == 40
