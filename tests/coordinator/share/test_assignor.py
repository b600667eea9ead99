"""The simple share assignor: Kafka 4's SimpleAssignor (group-coordinator/.../assignor/SimpleAssignor.java,
SimpleHomogeneousAssignmentBuilder.java, SimpleHeterogeneousAssignmentBuilder.java)."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.share.assignor import PartitionAssignorError, assign

T, U = uuid.UUID(int=1), uuid.UUID(int=2)


def subscribed(members, *topics):
    return {m: frozenset(topics) for m in members}


def test_members_outnumber_partitions_and_share_them():
    """SimpleHomogeneousAssignmentBuilder: desiredSharing = ceil(M / P); three members, one partition:
    all three are assigned it."""
    assert assign(subscribed("abc", T), {T: 1}) == {m: {T: frozenset({0})} for m in "abc"}


def test_partitions_outnumber_members():
    """One member per partition, counts differing by at most one, handed out cycling over the members
    (assignRemainingPartitions)."""
    assert assign(subscribed("ab", T), {T: 5}) == {"a": {T: frozenset({0, 2, 4})}, "b": {T: frozenset({1, 3})}}


def test_five_members_two_partitions():
    """desiredSharing = 3 and desiredAssignmentCount = ceil(1.2 (i+1)) - ceil(1.2 i): 2, 1, 1, 1, 1."""
    assert assign(subscribed("abcde", T), {T: 2}) == {
        "a": {T: frozenset({0, 1})}, "b": {T: frozenset({0})}, "c": {T: frozenset({0})},
        "d": {T: frozenset({1})}, "e": {T: frozenset({1})}}


def test_sticky_when_a_member_leaves():
    """Balance first, then stickiness: revokeOverfilledMembers and revokeOversharedPartitions take away
    only what balance requires; the rest of the current assignment stays."""
    current = assign(subscribed("abcde", T), {T: 2})
    del current["e"]
    assert assign(subscribed("abcd", T), {T: 2}, current) == {
        "a": {T: frozenset({0})}, "b": {T: frozenset({0})}, "c": {T: frozenset({1})}, "d": {T: frozenset({1})}}


def test_unsubscribed_topic_is_revoked():
    """revokeUnassignablePartitions: partitions of a topic the members no longer subscribe to go."""
    current = {"a": {T: frozenset({0}), U: frozenset({0})}}
    assert assign(subscribed("a", U), {T: 1, U: 1}, current) == {"a": {U: frozenset({0})}}


def test_heterogeneous_subscriptions_balance_per_topic():
    """SimpleHeterogeneousAssignmentBuilder: each topic over the members subscribed to it."""
    assert assign({"a": frozenset({T}), "b": frozenset({U}), "c": frozenset({T, U})}, {T: 2, U: 2}) == {
        "a": {T: frozenset({0})}, "b": {U: frozenset({0})}, "c": {T: frozenset({1}), U: frozenset({1})}}


def test_unknown_topic_is_an_error():
    with pytest.raises(PartitionAssignorError):
        assign(subscribed("a", T), {})


def test_empty_group_and_empty_subscription():
    assert assign({}, {T: 3}) == {}
    assert assign({"a": frozenset()}, {T: 3}) == {"a": {}}


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), st.integers(1, 7), st.data())
def test_balanced_covering_and_deterministic(n_members, n_partitions, data):
    """Every partition has a member and at most ceil(M / P) (Kafka tolerates a partition left short when
    the only members still short of their count already hold it), member counts differ by at most one,
    and the result does not depend on the order members are given in."""
    members = [f"m{i}" for i in range(n_members)]
    previous = data.draw(st.fixed_dictionaries({m: st.sets(st.integers(0, n_partitions + 2)) for m in members}))
    current = {m: {T: frozenset(ps)} for m, ps in previous.items()}
    out = assign(subscribed(members, T), {T: n_partitions}, current)
    shuffled = dict(reversed(list(subscribed(members, T).items())))
    assert assign(shuffled, {T: n_partitions}, current) == out
    sharing = -(-n_members // n_partitions)
    counts = [len(out[m].get(T, ())) for m in members]
    assert max(counts) - min(counts) <= 1
    for p in range(n_partitions):
        holders = [m for m in members if p in out[m].get(T, ())]
        assert 1 <= len(holders) <= sharing
    assert all(p < n_partitions for m in members for p in out[m].get(T, ()))
