"""Properties of the change rules over random registrations, live sets and requests: the safety that
PartitionChangeBuilder's rules add up to (metadata/src/main/java/org/apache/kafka/controller/)."""
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.cluster.partition_change import (
    Election,
    PartitionChange,
    broker_fenced,
    broker_unfenced,
    build_change,
    cancel_reassignment,
    elect_leader,
    start_reassignment,
)
from kcoord.cluster.partition_state import NO_LEADER

from .strategies import BROKERS, live_sets, registrations


@st.composite
def requests(draw, current):
    """A change a caller could ask: maybe a new ISR (a non-empty subset of the replicas, or empty as the
    fencing of a last member asks), maybe an election type."""
    isr = draw(st.none() | st.lists(st.sampled_from(current.replicas), unique=True, max_size=len(current.replicas)))
    election = draw(st.sampled_from(list(Election)))
    return PartitionChange(isr=isr, election=election)


def check_step(before, after, live, unclean):
    """The invariants one change keeps (None = no change)."""
    if after is None:
        return
    assert after.partition_epoch == before.partition_epoch + 1, "partition epoch +1 on every change"
    assert after.leader_epoch >= before.leader_epoch, "the leader epoch never decreases"
    if after.leader != before.leader:
        assert after.leader_epoch == before.leader_epoch + 1, "a new leader means a new leader epoch"
    if after.leader != NO_LEADER:
        assert after.leader in live or after.leader == before.leader
        if not unclean:
            # elected from the ISR of the request: it is in the new ISR, which the request asked for
            assert after.leader in after.isr
    assert after.isr, "the ISR never becomes empty"
    assert after != before


@settings(max_examples=400)
@given(st.data(), registrations(), live_sets(), st.booleans())
def test_builder_invariants(data, current, live, unclean):
    change = data.draw(requests(current))
    after = build_change(current, live, change, unclean_leader_election_enable=unclean)
    really_unclean = unclean or change.election is Election.UNCLEAN
    check_step(current, after, live, really_unclean)
    if after is not None and after.leader != current.leader and after.leader != NO_LEADER:
        target = set(current.isr if change.isr is None else change.isr)
        completing = current.is_reassigning and set(after.replicas) != set(current.replicas)
        if not really_unclean or after.leader in target:
            assert after.leader in target or completing, "a clean leader comes from the requested ISR"
            assert after.leader in live
        else:
            # unclean: only when no live member of the requested ISR existed, and the ISR is {leader}
            assert not (target & set(live)) and after.isr == (after.leader,)


@settings(max_examples=300)
@given(registrations(), live_sets())
def test_no_leader_outside_the_isr_unless_unclean(current, live):
    """With unclean elections off, every event's leader is an ISR member that is live (or nobody)."""
    outcomes = [build_change(current, live)]
    outcomes += [broker_fenced(current, b, live) for b in BROKERS]
    outcomes += [broker_unfenced(current, b, live | {b}) for b in BROKERS]
    outcomes.append(elect_leader(current, Election.PREFERRED, live).registration)
    outcomes.append(cancel_reassignment(current, live).registration)
    for after in outcomes:
        check_step(current, after, live | set(BROKERS), unclean=False)
        if after is not None and after.leader != NO_LEADER and after.leader != current.leader:
            assert after.leader in after.isr and after.leader in (live | set(BROKERS))
            assert after.leader_recovery_state is current.leader_recovery_state


@settings(max_examples=300)
@given(registrations(), live_sets(), st.booleans())
def test_fencing_keeps_a_member_while_the_isr_had_one(current, live, unclean):
    """handleBrokerFenced over every broker in turn: the ISR is never emptied; a broker is only dropped
    while another member remains; it never leads after being fenced."""
    state = current
    for broker in BROKERS:
        after = broker_fenced(state, broker, live - {broker}, unclean_leader_election_enable=unclean)
        check_step(state, after, live, unclean)
        if after is not None:
            assert after.leader != broker
            if len(state.isr) > 1:
                assert broker not in after.isr
            state = after
        live = live - {broker}
    assert state.isr


@settings(max_examples=300)
@given(registrations(reassigning=False), st.lists(st.sampled_from(BROKERS), min_size=1, max_size=5, unique=True),
       live_sets())
def test_reassignment_keeps_the_invariants(current, target, live):
    """changePartitionReassignment then repeated ISR growth (the leader adding caught-up replicas)
    finishes with exactly the target replicas, and every step keeps the invariants."""
    out = start_reassignment(current, target, registered_brokers=set(BROKERS), live_brokers=live)
    state = current
    if out.registration is not None:
        check_step(state, out.registration, live, unclean=False)
        state = out.registration
    for replica in state.replicas:
        if state.is_reassigning and replica not in state.isr:
            grown = build_change(state, live, PartitionChange(isr=(*state.isr, replica)))
            check_step(state, grown, live, unclean=False)
            state = grown if grown is not None else state
    assert not state.is_reassigning
    assert state.replicas == tuple(target)
