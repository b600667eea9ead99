"""Kafka 4's partition change rules (metadata/src/main/java/org/apache/kafka/controller/
PartitionChangeBuilder.java, ReplicationControlManager.java, PartitionReassignmentReplicas.java,
PartitionReassignmentRevert.java), one rule a test; each docstring names the method it follows."""
import pytest

from kcoord.cluster.partition_change import (
    Election,
    IsrChangeRequest,
    PartitionChange,
    acks_all_error,
    alter_isr,
    broker_fenced,
    broker_in_controlled_shutdown,
    broker_unfenced,
    build_change,
    cancel_reassignment,
    complete_reassignment,
    elect_leader,
    enough_replicas_for_acks_all,
    reassignment_replicas,
    rebalance_to_preferred_leader,
    start_reassignment,
    validate_isr_change,
)
from kcoord.cluster.partition_state import NO_LEADER, LeaderRecoveryState, PartitionRegistration
from kcoord.protocol.errors import ErrorCode

RECOVERING = LeaderRecoveryState.RECOVERING
ALL = {1, 2, 3, 4, 5}


def reg(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, le=5, pe=10, **kw):
    return PartitionRegistration(replicas=replicas, isr=isr, leader=leader, leader_epoch=le, partition_epoch=pe, **kw)


# -- the builder --------------------------------------------------------------------------------------

def test_no_change_is_none():
    """PartitionChangeBuilder.build: a no-op record (changeRecordIsNoOp) is no record at all."""
    assert build_change(reg(), ALL) is None
    assert build_change(reg(), ALL, PartitionChange(isr=(1, 2, 3))) is None


def test_isr_shrink_keeps_the_leader_epoch():
    """build -> triggerLeaderEpochBumpForIsrShrinkIfNeeded: no bump from metadata version 3.6 on
    (KAFKA-15021); the partition epoch moves (PartitionRegistration.merge)."""
    after = build_change(reg(), ALL, PartitionChange(isr=(1, 2)))
    assert (after.isr, after.leader, after.leader_epoch, after.partition_epoch) == ((1, 2), 1, 5, 11)


def test_isr_shrink_bumps_the_leader_epoch_under_the_old_rule():
    """triggerLeaderEpochBumpForIsrShrinkIfNeeded below metadata version 3.6 (and the ZooKeeper
    controller's doRemoveReplicasFromIsr): kept reachable, off by default. Expansion never bumps."""
    after = build_change(reg(), ALL, PartitionChange(isr=(1, 2)), bump_leader_epoch_on_isr_shrink=True)
    assert (after.leader, after.leader_epoch) == (1, 6)
    grown = build_change(reg(isr=(1,)), ALL, PartitionChange(isr=(1, 2)), bump_leader_epoch_on_isr_shrink=True)
    assert grown.leader_epoch == 5


def test_leader_out_of_the_isr_is_replaced_by_the_first_live_isr_member():
    """electAnyLeader: keep the current leader while it is a live ISR member, else the first replica in
    assignment order that is; the leader epoch goes up by one (merge)."""
    after = build_change(reg(replicas=(1, 2, 3)), {2, 3}, PartitionChange(isr=(3, 2)))
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (2, (3, 2), 6, 11)


def test_a_dead_leader_is_replaced_even_without_an_isr_change():
    """electAnyLeader / isValidNewLeader: validity needs isAcceptableLeader (live) too."""
    after = build_change(reg(), {2, 3})
    assert (after.leader, after.isr, after.leader_epoch) == (2, (1, 2, 3), 6)


def test_no_live_isr_member_means_no_leader_not_an_unclean_one():
    """electAnyLeader with Election.ONLINE: NO_LEADER; unclean.leader.election.enable=false (KIP-106)."""
    after = build_change(reg(isr=(1,)), {2, 3})
    assert (after.leader, after.isr, after.leader_epoch) == (NO_LEADER, (1,), 6)
    assert build_change(after, {2, 3}) is None  # stays offline: nothing more to do


def test_unclean_election_when_the_topic_allows_it():
    """electAnyLeader with Election.UNCLEAN (set by ReplicationControlManager when the topic's
    unclean.leader.election.enable is true) and tryElection: the first live replica leads, the ISR
    becomes {it}, the recovery state RECOVERING."""
    offline = reg(isr=(1,), leader=NO_LEADER)
    after = build_change(offline, {2, 3}, unclean_leader_election_enable=True)
    assert (after.leader, after.isr, after.leader_recovery_state, after.leader_epoch) == (2, (2,), RECOVERING, 6)


def test_unclean_allowed_still_prefers_a_clean_leader():
    """electAnyLeader: ISR members first, unclean only when none is live."""
    after = build_change(reg(isr=(1, 3)), {2, 3}, unclean_leader_election_enable=True)
    assert (after.leader, after.isr, after.leader_recovery_state) == (3, (1, 3), LeaderRecoveryState.RECOVERED)


def test_preferred_election():
    """electPreferredLeader: the first replica if a live ISR member, else keep the current leader, else
    the next valid replica; never unclean."""
    led_by_2 = reg(leader=2)
    assert build_change(led_by_2, ALL, PartitionChange(election=Election.PREFERRED)).leader == 1
    assert build_change(led_by_2, {2, 3}, PartitionChange(election=Election.PREFERRED)) is None
    dead = reg(leader=2, isr=(1, 2, 3))
    assert build_change(dead, {1, 3}, PartitionChange(election=Election.PREFERRED)).leader == 1
    assert build_change(reg(isr=(1,), leader=NO_LEADER), {2}, PartitionChange(election=Election.PREFERRED),
                        unclean_leader_election_enable=True) is None


def test_leader_recovery_state_is_set_by_the_leader():
    """build: targetLeaderRecoveryState (from AlterPartition) replaces the current one when different."""
    recovering = reg(isr=(1,), leader_recovery_state=RECOVERING)
    after = build_change(recovering, ALL, PartitionChange(leader_recovery_state=LeaderRecoveryState.RECOVERED))
    assert after.leader_recovery_state is LeaderRecoveryState.RECOVERED and after.leader_epoch == 5


# -- broker events --------------------------------------------------------------------------------

def test_fenced_broker_leaves_the_isr_and_its_leadership():
    """ReplicationControlManager.handleBrokerFenced -> generateLeaderAndIsrUpdates(brokerToRemove)."""
    after = broker_fenced(reg(), 1, {2, 3})
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (2, (2, 3), 6, 11)
    follower_out = broker_fenced(reg(), 3, {1, 2})
    assert (follower_out.leader, follower_out.isr, follower_out.leader_epoch) == (1, (1, 2), 5)


def test_fenced_last_isr_member_stays_in_the_isr():
    """build: an empty target ISR is not written without ELR (KIP-966), so the last member stays and
    the partition has no leader; it comes back when that broker does (handleBrokerUnfenced)."""
    after = broker_fenced(reg(isr=(1,)), 1, {2, 3})
    assert (after.leader, after.isr, after.leader_epoch) == (NO_LEADER, (1,), 6)
    back = broker_unfenced(after, 1, {2, 3})
    assert (back.leader, back.isr, back.leader_epoch, back.partition_epoch) == (1, (1,), 7, 12)


def test_fencing_a_broker_outside_the_isr_changes_nothing():
    """generateLeaderAndIsrUpdates runs over brokersToIsrs.partitionsWithBrokerInIsr only."""
    assert broker_fenced(reg(isr=(1, 2)), 3, {1, 2}) is None


def test_fenced_with_unclean_allowed_never_elects_the_fenced_broker():
    """generateLeaderAndIsrUpdates: brokerToRemove is never an acceptable leader, even uncleanly."""
    after = broker_fenced(reg(isr=(1,)), 1, {1, 3}, unclean_leader_election_enable=True)
    assert (after.leader, after.isr, after.leader_recovery_state) == (3, (3,), RECOVERING)


def test_controlled_shutdown_moves_leadership_away():
    """handleBrokerInControlledShutdown: the same rule as fencing, applied while the broker still runs."""
    after = broker_in_controlled_shutdown(reg(), 1, {2, 3})
    assert (after.leader, after.isr, after.leader_epoch) == (2, (2, 3), 6)


def test_unfenced_broker_only_touches_leaderless_partitions():
    """handleBrokerUnfenced: brokersToIsrs.partitionsWithNoLeader, with the broker acceptable."""
    assert broker_unfenced(reg(), 2, ALL) is None
    offline = reg(isr=(2, 3), leader=NO_LEADER)
    assert broker_unfenced(offline, 3, set()).leader == 3


# -- ElectLeaders and auto rebalance -----------------------------------------------------------------

def test_elect_leaders_answers():
    """ReplicationControlManager.electLeader: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
    ELIGIBLE_LEADERS_NOT_AVAILABLE; an UNCLEAN request is unclean whatever the topic config (KIP-460)."""
    assert elect_leader(reg(), Election.PREFERRED, ALL).error is ErrorCode.ELECTION_NOT_NEEDED
    assert elect_leader(reg(leader=2), Election.PREFERRED, {2, 3}).error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    moved = elect_leader(reg(leader=2), Election.PREFERRED, ALL)
    assert moved.error is ErrorCode.NONE and moved.registration.leader == 1
    assert elect_leader(reg(), Election.UNCLEAN, ALL).error is ErrorCode.ELECTION_NOT_NEEDED
    offline = reg(isr=(1,), leader=NO_LEADER)
    assert elect_leader(offline, Election.UNCLEAN, set()).error is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    forced = elect_leader(offline, Election.UNCLEAN, {3})
    assert (forced.registration.leader, forced.registration.isr) == (3, (3,))
    with pytest.raises(ValueError):
        elect_leader(reg(), Election.ONLINE, ALL)


def test_auto_rebalance_moves_to_the_preferred_replica():
    """maybeTriggerLeaderChangeForPartitionsWithoutPreferredLeader: a PREFERRED election for each
    partition not led by its first replica (imbalancedPartitions)."""
    assert rebalance_to_preferred_leader(reg(), ALL) is None
    assert rebalance_to_preferred_leader(reg(leader=3), ALL).leader == 1
    assert rebalance_to_preferred_leader(reg(leader=3, isr=(2, 3)), ALL) is None  # 1 not in sync


# -- reassignment ----------------------------------------------------------------------------------

def test_reassignment_replicas():
    """PartitionReassignmentReplicas(PartitionAssignment, PartitionAssignment): target + removing;
    adding and removing sorted (TreeSet)."""
    assert reassignment_replicas((1, 2, 3), (4, 3, 5)) == ((4, 3, 5, 1, 2), (4, 5), (1, 2))


def test_complete_reassignment():
    """PartitionReassignmentReplicas.maybeCompleteReassignment."""
    assert complete_reassignment((4, 3, 1), (1, 3), (4,), (1,)) is None  # 4 not in sync yet
    assert complete_reassignment((4, 3, 1), (1, 3, 4), (4,), (1,)) == ((4, 3), (3, 4))
    assert complete_reassignment((1, 2), (1,), (), (1,)) is None  # nothing would stay in sync
    assert complete_reassignment((1, 2), (1, 2), (), ()) is None  # none in progress


def test_reassignment_phases():
    """changePartitionReassignment, then completion inside an ISR change (alterPartition -> build ->
    completeReassignmentIfNeeded), with NEW_LEADER_ELECTED when the leader is dropped and a leader epoch
    bump because replicas are dropped (triggerLeaderEpochBumpForReplicaReassignmentIfNeeded)."""
    start = reg(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
    begun = start_reassignment(start, (4, 2, 3), registered_brokers=ALL, live_brokers=ALL)
    a = begun.registration
    assert (a.replicas, a.adding_replicas, a.removing_replicas, a.isr, a.leader) == ((4, 2, 3, 1), (4,), (1,), (1, 2, 3), 1)
    assert (a.leader_epoch, a.partition_epoch) == (5, 11)  # adding alone fences nobody
    done = alter_isr(a, IsrChangeRequest(1, a.leader_epoch, a.partition_epoch, (1, 2, 3, 4)), ALL)
    b = done.registration
    assert done.error is ErrorCode.NEW_LEADER_ELECTED  # the new leader is the first live ISR member in order
    assert (b.replicas, b.isr, b.adding_replicas, b.removing_replicas, b.leader) == ((4, 2, 3), (2, 3, 4), (), (), 4)
    assert (b.leader_epoch, b.partition_epoch) == (6, 12)


def test_reassignment_dropping_a_follower_bumps_the_leader_epoch_without_moving_the_leader():
    """triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: the dropped replica is fenced by the epoch."""
    a = start_reassignment(reg(), (1, 2), ALL, ALL).registration
    assert (a.replicas, a.isr, a.leader, a.leader_epoch) == ((1, 2), (1, 2), 1, 6)


def test_reordering_replicas_completes_at_once():
    """changePartitionReassignment: a reorder of the same replicas needs no catching up."""
    a = start_reassignment(reg(), (3, 1, 2), ALL, ALL).registration
    assert (a.replicas, a.adding_replicas, a.leader, a.leader_epoch) == ((3, 1, 2), (), 1, 5)
    assert rebalance_to_preferred_leader(a, ALL).leader == 3


def test_bad_reassignment_targets():
    """changePartitionReassignment -> validateManualPartitionAssignment: INVALID_REPLICA_ASSIGNMENT."""
    for target in [(), (1, 1), (1, 9)]:
        assert start_reassignment(reg(), target, ALL, ALL).error is ErrorCode.INVALID_REPLICATION_ASSIGNMENT


def test_cancel_reassignment():
    """cancelPartitionReassignment / PartitionReassignmentRevert: back to the original replicas, the ISR
    without the added ones; NO_REASSIGNMENT_IN_PROGRESS when none; an unclean revert is refused unless
    the topic allows unclean elections."""
    assert cancel_reassignment(reg(), ALL).error is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    ongoing = reg(replicas=(4, 2, 3, 1), isr=(1, 2, 3, 4), adding_replicas=(4,), removing_replicas=(1,))
    back = cancel_reassignment(ongoing, ALL).registration
    assert (back.replicas, back.isr, back.adding_replicas, back.removing_replicas) == ((2, 3, 1), (1, 2, 3), (), ())
    only_new = reg(replicas=(4, 1), isr=(4,), leader=4, adding_replicas=(4,), removing_replicas=(1,))
    assert cancel_reassignment(only_new, ALL).error is ErrorCode.INVALID_REPLICATION_ASSIGNMENT
    forced = cancel_reassignment(only_new, ALL, unclean_leader_election_enable=True).registration
    assert (forced.replicas, forced.isr, forced.leader) == ((1,), (1,), 1)


# -- AlterPartition ---------------------------------------------------------------------------------

CURRENT = reg(replicas=(1, 2, 3), isr=(1, 2), leader=1, le=5, pe=10)


@pytest.mark.parametrize("args, error", [
    ((1, 6, 10, (1, 2, 3)), ErrorCode.NOT_CONTROLLER),  # leader epoch ahead of the state read
    ((1, 5, 11, (1, 2, 3)), ErrorCode.NOT_CONTROLLER),  # partition epoch ahead
    ((1, 4, 10, (1, 2, 3)), ErrorCode.FENCED_LEADER_EPOCH),  # a deposed leader
    ((2, 5, 10, (1, 2, 3)), ErrorCode.INVALID_REQUEST),  # not the leader
    ((1, 5, 9, (1, 2, 3)), ErrorCode.INVALID_UPDATE_VERSION),  # the partition changed since
    ((1, 5, 10, (1, 2, 2)), ErrorCode.INVALID_REQUEST),  # duplicates
    ((1, 5, 10, (1, 4)), ErrorCode.INVALID_REQUEST),  # not a replica
    ((1, 5, 10, (2, 3)), ErrorCode.INVALID_REQUEST),  # without the leader
    ((1, 5, 10, (1, 2, 3)), ErrorCode.NONE),
])
def test_validate_isr_change(args, error):
    """ReplicationControlManager.validateAlterPartitionData, in its order."""
    assert validate_isr_change(CURRENT, *args, live_brokers=ALL) is error


def test_validate_isr_change_unknown_partition_and_ineligible_replicas():
    """validateAlterPartitionData / ineligibleReplicasForIsr: every member must be registered, unfenced,
    not shutting down and (KIP-903) at the broker epoch the leader saw; before v2 the answer was
    OPERATION_NOT_ATTEMPTED."""
    assert validate_isr_change(None, 1, 0, 0, (1,), ALL) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert validate_isr_change(CURRENT, 1, 5, 10, (1, 2, 3), {1, 2}) is ErrorCode.INELIGIBLE_REPLICA
    assert validate_isr_change(CURRENT, 1, 5, 10, (1, 2, 3), {1, 2},
                               request_version=1) is ErrorCode.OPERATION_NOT_ATTEMPTED
    epochs = {1: 100, 2: 200, 3: 300}
    assert validate_isr_change(CURRENT, 1, 5, 10, (1, 2, 3), ALL, isr_broker_epochs={3: 299},
                               registered_broker_epochs=epochs) is ErrorCode.INELIGIBLE_REPLICA
    assert validate_isr_change(CURRENT, 1, 5, 10, (1, 2, 3), ALL, isr_broker_epochs={3: 300, 2: -1},
                               registered_broker_epochs=epochs) is ErrorCode.NONE


def test_validate_isr_change_recovery_state():
    """validateAlterPartitionData: RECOVERING allows only the leader in the ISR, and RECOVERED never goes
    back to RECOVERING."""
    recovering = reg(isr=(1,), le=5, pe=10, leader_recovery_state=RECOVERING)
    assert validate_isr_change(recovering, 1, 5, 10, (1, 2), ALL,
                               leader_recovery_state=RECOVERING) is ErrorCode.INVALID_REQUEST
    assert validate_isr_change(CURRENT, 1, 5, 10, (1,), ALL,
                               leader_recovery_state=RECOVERING) is ErrorCode.INVALID_REQUEST
    recovered = alter_isr(recovering, IsrChangeRequest(1, 5, 10, (1, 2)), ALL).registration
    assert (recovered.isr, recovered.leader_recovery_state) == ((1, 2), LeaderRecoveryState.RECOVERED)


def test_alter_isr_expands_and_shrinks():
    """ReplicationControlManager.alterPartition -> PartitionChangeBuilder.build: the partition epoch
    moves, the leader epoch does not; asking for the current ISR changes nothing."""
    grown = alter_isr(CURRENT, IsrChangeRequest(1, 5, 10, (1, 2, 3)), ALL)
    assert grown.error is ErrorCode.NONE
    assert (grown.registration.isr, grown.registration.leader_epoch, grown.registration.partition_epoch) == ((1, 2, 3), 5, 11)
    same = alter_isr(CURRENT, IsrChangeRequest(1, 5, 10, (1, 2)), ALL)
    assert same == type(same)()
    refused = alter_isr(CURRENT, IsrChangeRequest(1, 4, 10, (1,)), ALL)
    assert (refused.error, refused.registration) == (ErrorCode.FENCED_LEADER_EPOCH, None)


def test_alter_isr_new_leader_before_v2_is_fenced_leader_epoch():
    """alterPartition: FENCED_LEADER_EPOCH stands for NEW_LEADER_ELECTED up to AlterPartition v1."""
    ongoing = reg(replicas=(2, 1), isr=(1,), leader=1, removing_replicas=(1,), adding_replicas=(2,))
    out = alter_isr(ongoing, IsrChangeRequest(1, 5, 10, (1, 2)), ALL, request_version=1)
    assert out.error is ErrorCode.FENCED_LEADER_EPOCH and out.registration.leader == 2


# -- min ISR ---------------------------------------------------------------------------------------

def test_min_isr():
    """Partition.appendRecordsToLeader (NOT_ENOUGH_REPLICAS) and checkEnoughReplicasReachOffset
    (NOT_ENOUGH_REPLICAS_AFTER_APPEND) for acks=all."""
    assert enough_replicas_for_acks_all(2, 2) and not enough_replicas_for_acks_all(1, 2)
    assert acks_all_error(3, 2) is ErrorCode.NONE
    assert acks_all_error(1, 2) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert acks_all_error(1, 2, after_append=True) is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_unclean_pick_of_the_current_leader_keeps_it_in_the_isr():
    """A deliberate difference: tryElection writes nothing when the unclean pick is the current leader,
    which with a target ISR that leaves that (still live) leader out would give a leader outside its ISR.
    No Kafka caller asks that; kcoord makes the ISR {leader}, RECOVERING, without a new leader epoch."""
    after = build_change(reg(replicas=(0, 1), isr=(1,), leader=1), {1}, PartitionChange(isr=(0,)),
                         unclean_leader_election_enable=True)
    assert (after.leader, after.isr, after.leader_recovery_state, after.leader_epoch) == (1, (1,), RECOVERING, 5)
