"""Kafka's rules for changing a partition's state, as pure functions: the current registration and a
request in, the next registration (to write by compare-and-set) or "no change" out. No I/O here.

The core is `build_change`, kcoord's counterpart of KRaft's `PartitionChangeBuilder.build()`
(metadata/src/main/java/org/apache/kafka/controller/PartitionChangeBuilder.java). The events around it
follow `ReplicationControlManager` (same folder): a broker fenced or in controlled shutdown, a broker
unfenced, ElectLeaders, auto leader rebalance, reassignment start / cancel, and the leader's own ISR
change with AlterPartition's checks.

Kafka 4 (KRaft) rules, not the ZooKeeper-era controller's, wherever the two differ:
- The leader epoch goes up by one whenever the change writes the leader field: a new leader, no
  leader, or a reassignment whose new replica list drops a replica (PartitionChangeBuilder.
  triggerLeaderEpochBumpForReplicaReassignmentIfNeeded). It does **not** go up on an ISR shrink:
  KRaft bumps on shrink only below metadata version 3.6
  (triggerLeaderEpochBumpForIsrShrinkIfNeeded, KAFKA-15021), a workaround for a broker bug, and the
  ZooKeeper controller bumped on every ISR removal it made (ReplicaStateMachine.
  doRemoveReplicasFromIsr). kcoord follows 4.x: the epoch then fences exactly the changes of role,
  followers are not fenced (and clients not sent back to Metadata) by each shrink, and a zombie leader is
  still fenced because its ISR writes compare the partition epoch. `bump_leader_epoch_on_isr_shrink`
  keeps the old rule reachable for comparison.
- The partition epoch goes up by one on every change (PartitionRegistration.merge).
- Controlled shutdown is the fencing rule (handleBrokerInControlledShutdown and handleBrokerFenced both
  call generateLeaderAndIsrUpdates with the broker to remove): the broker leaves every ISR it is in,
  except where it is the last member, and leadership moves to another live ISR member or to nobody.
- Reassignment completes inside any change once every target replica is in the ISR
  (PartitionReassignmentReplicas.maybeCompleteReassignment); there is no separate phase B request.
- Eligible leader replicas (KIP-966) are not modelled: they are off by default in Kafka 4.0, and without
  them the ISR never becomes empty (the last member stays, with no leader).
"""
from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kcoord.cluster.partition_state import NO_LEADER, LeaderRecoveryState, PartitionRegistration
from kcoord.cluster.replica_placement import validate_replica_list
from kcoord.protocol.errors import ErrorCode

# AlterPartition v2 (KIP-841) answers INELIGIBLE_REPLICA and NEW_LEADER_ELECTED where v0-1 answered
# OPERATION_NOT_ATTEMPTED and FENCED_LEADER_EPOCH; v3 (KIP-903) adds the replicas' broker epochs.
ALTER_PARTITION_LATEST_VERSION = 3
NO_BROKER_EPOCH = -1  # a broker epoch the ISR change does not ask to verify (AlterPartition's default)


class Election(enum.Enum):
    """How a leader is chosen (PartitionChangeBuilder.Election). ElectLeaders' election types are
    PREFERRED and UNCLEAN."""

    ONLINE = "online"  # keep the current leader if it may lead, else the first live ISR member
    PREFERRED = "preferred"  # the first replica if it may lead, else as ONLINE
    UNCLEAN = "unclean"  # as ONLINE, else any live replica (the ISR becomes {it}: data may be lost)


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """What a caller asks of a partition. None keeps the current value."""

    isr: Sequence[int] | None = None
    replicas: Sequence[int] | None = None
    adding_replicas: Sequence[int] | None = None
    removing_replicas: Sequence[int] | None = None
    leader_recovery_state: LeaderRecoveryState | None = None
    election: Election = Election.ONLINE


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer to a request about a partition: an error (with an optional message) and the
    registration to write, if any. Both can be set: AlterPartition's NEW_LEADER_ELECTED is an error
    answered together with the change it made."""

    error: ErrorCode = ErrorCode.NONE
    registration: PartitionRegistration | None = None
    message: str | None = None


def build_change(
    current: PartitionRegistration,
    live_brokers: Collection[int],
    change: PartitionChange = PartitionChange(),
    *,
    unclean_leader_election_enable: bool = False,
    bump_leader_epoch_on_isr_shrink: bool = False,
) -> PartitionRegistration | None:
    """The registration after `change`, or None when nothing would change (PartitionChangeBuilder.build).

    `live_brokers` are the brokers that may lead: registered, unfenced and not in controlled shutdown
    (ClusterControlManager.isActive through ReplicationControlManager.LeaderAcceptor).
    `unclean_leader_election_enable` is the topic's `unclean.leader.election.enable`: it turns an ONLINE
    election into an UNCLEAN one, as ReplicationControlManager does before each build; it never turns a
    PREFERRED one into UNCLEAN. An explicit `Election.UNCLEAN` (ElectLeaders) is unclean either way.

    The steps, in Kafka's order: complete a reassignment whose targets are all in sync; elect; bump the
    leader epoch if replicas are dropped; take the target ISR (never an empty one); apply the replica
    lists and the recovery state; compute the epochs.
    """
    replicas = tuple(current.replicas if change.replicas is None else change.replicas)
    isr = tuple(current.isr if change.isr is None else change.isr)
    adding = tuple(current.adding_replicas if change.adding_replicas is None else change.adding_replicas)
    removing = tuple(current.removing_replicas if change.removing_replicas is None else change.removing_replicas)
    election = change.election
    if election is Election.ONLINE and unclean_leader_election_enable:
        election = Election.UNCLEAN

    completed = complete_reassignment(replicas, isr, adding, removing)
    if completed is not None:
        replicas, isr = completed
        adding = removing = ()

    leader, unclean = _elect(current, replicas, isr, live_brokers, election)
    leader_written = leader != current.leader
    new_isr = current.isr
    recovery = current.leader_recovery_state
    if unclean:
        # PartitionChangeBuilder.tryElection: an unclean leader is the whole ISR, and it recovers first.
        # Kafka does this only when the leader changes; kcoord also when the unclean pick is the current
        # leader (a request whose ISR leaves out a leader that stays eligible, which no Kafka caller
        # makes), so that the leader is always in the ISR.
        new_isr = (leader,)
        recovery = LeaderRecoveryState.RECOVERING
    elif isr and isr != current.isr:
        new_isr = isr  # an empty target ISR is never taken: its last member stays (no ELR)

    if not leader_written and not set(replicas).issuperset(current.replicas):
        leader_written = True  # a replica is dropped: fence it with a new leader epoch, same leader
    if bump_leader_epoch_on_isr_shrink and not leader_written and not set(new_isr).issuperset(current.isr):
        leader_written = True

    if change.leader_recovery_state is not None and change.leader_recovery_state != current.leader_recovery_state:
        recovery = change.leader_recovery_state
    candidate = current.changed(
        replicas=replicas or current.replicas,  # an empty replica list is never written
        isr=new_isr,
        leader=leader,
        leader_recovery_state=recovery,
        adding_replicas=adding,
        removing_replicas=removing,
    )
    if not leader_written and candidate == current:
        return None
    return candidate.changed(
        leader_epoch=current.leader_epoch + (1 if leader_written else 0),
        partition_epoch=current.partition_epoch + 1,
    )


def _elect(
    current: PartitionRegistration,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    live: Collection[int],
    election: Election,
) -> tuple[int, bool]:
    """(leader, unclean) by PartitionChangeBuilder.electPreferredLeader / electAnyLeader: a valid leader
    is a live member of the target ISR; the current leader is kept while valid (except that PREFERRED
    first tries the first replica); an unclean leader is the first live replica."""

    def valid(broker: int) -> bool:
        return broker in isr and broker in live

    if election is Election.PREFERRED:
        if replicas and valid(replicas[0]):
            return replicas[0], False
        if valid(current.leader):
            return current.leader, False
        return next((r for r in replicas[1:] if valid(r)), NO_LEADER), False
    if valid(current.leader):
        return current.leader, False
    clean = next((r for r in replicas if valid(r)), NO_LEADER)
    if clean != NO_LEADER or election is not Election.UNCLEAN:
        return clean, False
    unclean = next((r for r in replicas if r in live), NO_LEADER)
    return unclean, unclean != NO_LEADER


# -- reassignment (KIP-455, as KRaft runs it) ---------------------------------------------------------


def reassignment_replicas(
    current_replicas: Sequence[int], target_replicas: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(replicas, adding, removing) while moving from `current_replicas` to `target_replicas`: the
    target followed by the replicas being removed; adding and removing in ascending order
    (PartitionReassignmentReplicas(PartitionAssignment, PartitionAssignment))."""
    removing = tuple(sorted(set(current_replicas) - set(target_replicas)))
    adding = tuple(sorted(set(target_replicas) - set(current_replicas)))
    return tuple(target_replicas) + removing, adding, removing


def complete_reassignment(
    replicas: Sequence[int], isr: Sequence[int], adding: Sequence[int], removing: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(replicas, isr) once the ongoing reassignment can finish, else None
    (PartitionReassignmentReplicas.maybeCompleteReassignment): without the removed replicas the ISR must
    be non-empty and hold every remaining replica."""
    if not adding and not removing:
        return None
    new_isr = tuple(r for r in isr if r not in removing)
    new_replicas = tuple(r for r in replicas if r not in removing)
    if not new_isr or not new_replicas or not set(new_isr).issuperset(new_replicas):
        return None
    return new_replicas, new_isr


def start_reassignment(
    current: PartitionRegistration,
    target_replicas: Sequence[int],
    registered_brokers: Collection[int],
    live_brokers: Collection[int],
) -> Outcome:
    """AlterPartitionReassignments for one partition (ReplicationControlManager.
    changePartitionReassignment): the target is checked as a manual assignment, the replica list becomes
    target + removing, and the change completes at once when the ISR already allows it (a reorder of the
    same replicas does). Adding and removing are only replaced when the new ones are not empty, as in
    Kafka, so asking for the current replica list leaves an ongoing reassignment running."""
    problem = validate_replica_list(target_replicas, registered_brokers)
    if problem:
        return Outcome(ErrorCode.INVALID_REPLICATION_ASSIGNMENT, message=problem)
    replicas, adding, removing = reassignment_replicas(current.replicas, target_replicas)
    change = PartitionChange(
        replicas=None if replicas == current.replicas else replicas,
        adding_replicas=adding or None,
        removing_replicas=removing or None,
    )
    return Outcome(registration=build_change(current, live_brokers, change))


def cancel_reassignment(
    current: PartitionRegistration,
    live_brokers: Collection[int],
    *,
    unclean_leader_election_enable: bool = False,
) -> Outcome:
    """AlterPartitionReassignments with null replicas (ReplicationControlManager.
    cancelPartitionReassignment, PartitionReassignmentRevert): back to the original replicas, the ISR
    without the replicas being added. If only added replicas were in sync, the first original replica
    becomes the ISR, which is an unclean election and is refused unless the topic allows one."""
    if not current.is_reassigning:
        return Outcome(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    replicas = current.original_replicas
    isr = tuple(r for r in current.isr if r not in current.adding_replicas)
    if not isr:
        if not unclean_leader_election_enable:
            return Outcome(ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
                           message="reverting this reassignment would need an unclean leader election")
        isr = replicas[:1]
    change = PartitionChange(isr=isr, replicas=replicas, adding_replicas=(), removing_replicas=())
    return Outcome(registration=build_change(
        current, live_brokers, change, unclean_leader_election_enable=unclean_leader_election_enable))


# -- broker events and elections (ReplicationControlManager) ------------------------------------------


def broker_fenced(
    current: PartitionRegistration,
    broker_id: int,
    live_brokers: Collection[int],
    *,
    unclean_leader_election_enable: bool = False,
) -> PartitionRegistration | None:
    """A broker lost its registration, was fenced or unregistered (handleBrokerFenced /
    handleBrokerUnregistered -> generateLeaderAndIsrUpdates): it leaves the ISR unless it is its last
    member, and may not lead; a new leader comes from the rest of the live ISR, or nobody leads.
    Partitions whose ISR does not hold the broker are not touched."""
    if broker_id not in current.isr:
        return None
    may_lead = set(live_brokers) - {broker_id}
    isr = tuple(r for r in current.isr if r != broker_id)
    return build_change(current, may_lead, PartitionChange(isr=isr),
                        unclean_leader_election_enable=unclean_leader_election_enable)


# A broker asked to shut down (SIGTERM): KRaft applies the fencing rule to it at once
# (handleBrokerInControlledShutdown calls generateLeaderAndIsrUpdates as handleBrokerFenced does), so its
# leaderships move to other live ISR members before it exits. The ZooKeeper controller instead moved
# leadership with its ControlledShutdownLeaderSelector and shrank the ISRs it followed in with a
# leader-epoch bump.
broker_in_controlled_shutdown = broker_fenced


def broker_unfenced(
    current: PartitionRegistration,
    broker_id: int,
    live_brokers: Collection[int],
    *,
    unclean_leader_election_enable: bool = False,
) -> PartitionRegistration | None:
    """A broker came (back) to life (handleBrokerUnfenced): each leaderless partition gets a leader if
    the broker (or another live broker) may now lead it. Partitions with a leader are not touched."""
    if current.has_leader:
        return None
    may_lead = set(live_brokers) | {broker_id}
    return build_change(current, may_lead, unclean_leader_election_enable=unclean_leader_election_enable)


def elect_leader(current: PartitionRegistration, election: Election, live_brokers: Collection[int]) -> Outcome:
    """ElectLeaders for one partition (ReplicationControlManager.electLeader). PREFERRED is not needed
    when the first replica leads, UNCLEAN when anyone leads (ELECTION_NOT_NEEDED); a build that changes
    nothing is PREFERRED_LEADER_NOT_AVAILABLE or ELIGIBLE_LEADERS_NOT_AVAILABLE. An UNCLEAN request is
    unclean whatever the topic's config says: it is the operator's explicit choice (KIP-460)."""
    if election is Election.ONLINE:
        raise ValueError("ElectLeaders asks for a PREFERRED or an UNCLEAN election")
    if (election is Election.PREFERRED and current.has_preferred_leader) or (
            election is Election.UNCLEAN and current.has_leader):
        return Outcome(ErrorCode.ELECTION_NOT_NEEDED)
    changed = build_change(current, live_brokers, PartitionChange(election=election))
    if changed is None:
        error = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election is Election.PREFERRED
                 else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        return Outcome(error)
    return Outcome(registration=changed)


def rebalance_to_preferred_leader(
    current: PartitionRegistration, live_brokers: Collection[int]
) -> PartitionRegistration | None:
    """auto.leader.rebalance.enable's step for one partition: a partition not led by its first replica
    gets a PREFERRED election (maybeTriggerLeaderChangeForPartitionsWithoutPreferredLeader)."""
    if current.has_preferred_leader:
        return None
    return build_change(current, live_brokers, PartitionChange(election=Election.PREFERRED))


# -- the leader's ISR change (AlterPartition) --------------------------------------------------------


def validate_isr_change(
    current: PartitionRegistration | None,
    leader_id: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: Sequence[int],
    live_brokers: Collection[int],
    *,
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED,
    isr_broker_epochs: Mapping[int, int] | None = None,
    registered_broker_epochs: Mapping[int, int] | None = None,
    request_version: int = ALTER_PARTITION_LATEST_VERSION,
) -> ErrorCode:
    """The checks of an ISR change asked by `leader_id`, which read the partition at `leader_epoch` /
    `partition_epoch` (ReplicationControlManager.validateAlterPartitionData, in its order):

    - no such partition: UNKNOWN_TOPIC_OR_PARTITION;
    - either epoch newer than the current state: NOT_CONTROLLER (Kafka: the request comes from a newer
      controller's world; here: the state given is older than what the leader knows, re-read it);
    - an older leader epoch: FENCED_LEADER_EPOCH; not the leader: INVALID_REQUEST;
    - an older partition epoch: INVALID_UPDATE_VERSION (someone changed the partition since);
    - an ISR with duplicates, negative ids or non-replicas, or without the leader: INVALID_REQUEST;
    - RECOVERING with more than the leader in the ISR, or RECOVERED -> RECOVERING: INVALID_REQUEST;
    - a member that is not live (not registered, fenced or shutting down) or whose broker epoch in
      `isr_broker_epochs` is not its current one in `registered_broker_epochs` (KIP-903; -1 skips the
      check): INELIGIBLE_REPLICA (OPERATION_NOT_ATTEMPTED before AlterPartition v2).
    Every member is checked, not only the added ones, as Kafka does.
    """
    if current is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if leader_epoch > current.leader_epoch or partition_epoch > current.partition_epoch:
        return ErrorCode.NOT_CONTROLLER
    if leader_epoch < current.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if leader_id != current.leader:
        return ErrorCode.INVALID_REQUEST
    if partition_epoch < current.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if (len(set(new_isr)) != len(new_isr) or any(r < 0 for r in new_isr)
            or not set(current.replicas).issuperset(new_isr) or current.leader not in new_isr):
        return ErrorCode.INVALID_REQUEST
    if leader_recovery_state is LeaderRecoveryState.RECOVERING and len(new_isr) > 1:
        return ErrorCode.INVALID_REQUEST
    if (current.leader_recovery_state is LeaderRecoveryState.RECOVERED
            and leader_recovery_state is LeaderRecoveryState.RECOVERING):
        return ErrorCode.INVALID_REQUEST
    if _ineligible(new_isr, live_brokers, isr_broker_epochs or {}, registered_broker_epochs or {}):
        return ErrorCode.INELIGIBLE_REPLICA if request_version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
    return ErrorCode.NONE


def _ineligible(isr: Iterable[int], live: Collection[int], asked: Mapping[int, int],
                registered: Mapping[int, int]) -> list[int]:
    """ReplicationControlManager.ineligibleReplicasForIsr."""
    bad = []
    for broker in isr:
        epoch = asked.get(broker, NO_BROKER_EPOCH)
        if broker not in live or (epoch != NO_BROKER_EPOCH and registered.get(broker) != epoch):
            bad.append(broker)
    return bad


@dataclass(frozen=True, slots=True)
class IsrChangeRequest:
    """One partition of a leader's ISR change (AlterPartitionRequest's PartitionData): who asks, the
    epochs of the state it read, the ISR it wants, its recovery state and, from AlterPartition v3
    (KIP-903), the broker epoch it saw for each member (NO_BROKER_EPOCH: unchecked)."""

    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: Sequence[int]
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    isr_broker_epochs: Mapping[int, int] | None = None


def alter_isr(
    current: PartitionRegistration | None,
    request: IsrChangeRequest,
    live_brokers: Collection[int],
    *,
    unclean_leader_election_enable: bool = False,
    registered_broker_epochs: Mapping[int, int] | None = None,
    request_version: int = ALTER_PARTITION_LATEST_VERSION,
) -> Outcome:
    """A leader's ISR change, whole (ReplicationControlManager.alterPartition): validate, then build with
    the new ISR and recovery state. When the change completes a reassignment that moves the leadership
    away, the answer is NEW_LEADER_ELECTED (FENCED_LEADER_EPOCH before v2) *and* the change is written:
    the leader must stop leading. With no error and no registration, the ISR already is the one asked."""
    error = validate_isr_change(
        current, request.leader_id, request.leader_epoch, request.partition_epoch, request.new_isr,
        live_brokers, leader_recovery_state=request.leader_recovery_state,
        isr_broker_epochs=request.isr_broker_epochs, registered_broker_epochs=registered_broker_epochs,
        request_version=request_version)
    if error is not ErrorCode.NONE:
        return Outcome(error)
    assert current is not None  # validate_isr_change answered UNKNOWN_TOPIC_OR_PARTITION otherwise
    change = PartitionChange(isr=tuple(request.new_isr), leader_recovery_state=request.leader_recovery_state)
    changed = build_change(current, live_brokers, change,
                           unclean_leader_election_enable=unclean_leader_election_enable)
    if changed is not None and changed.leader != request.leader_id:
        error = ErrorCode.NEW_LEADER_ELECTED if request_version > 1 else ErrorCode.FENCED_LEADER_EPOCH
        return Outcome(error, changed)
    return Outcome(registration=changed)


# -- min ISR (the leader's side of acks=all) ----------------------------------------------------------


def enough_replicas_for_acks_all(isr_size: int, min_insync_replicas: int) -> bool:
    """Whether an acks=all (-1) produce may be appended: the ISR holds at least min.insync.replicas
    members (Partition.appendRecordsToLeader). Other acks are not limited by the ISR."""
    return isr_size >= min_insync_replicas


def acks_all_error(isr_size: int, min_insync_replicas: int, *, after_append: bool = False) -> ErrorCode:
    """NONE, or what an acks=all produce is answered when the ISR is below min.insync.replicas:
    NOT_ENOUGH_REPLICAS before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank while the
    produce waited for it (Partition.checkEnoughReplicasReachOffset)."""
    if enough_replicas_for_acks_all(isr_size, min_insync_replicas):
        return ErrorCode.NONE
    return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND if after_append else ErrorCode.NOT_ENOUGH_REPLICAS
