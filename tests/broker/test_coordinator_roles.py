"""CoordinatorRoles: partition role changes become coordinator elections and resignations, one per term
(Kafka 4's BrokerMetadataPublisher → GroupCoordinatorService.onElection / onResignation)."""
from kcoord.broker.coordinator_roles import CoordinatorRoles
from kcoord.cluster.metadata_image import BecomeFollower, BecomeLeader, StopReplica, TopicPartition
from kcoord.cluster.partition_state import PartitionRegistration

OFFSETS = "__consumer_offsets"


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int | None]] = []

    def on_election(self, partition: int, leader_epoch: int) -> None:
        self.calls.append(("elect", partition, leader_epoch))

    def on_resignation(self, partition: int, leader_epoch: int | None) -> None:
        self.calls.append(("resign", partition, leader_epoch))


def _lead(partition: int, epoch: int, topic: str = OFFSETS) -> BecomeLeader:
    reg = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=epoch)
    return BecomeLeader(TopicPartition(topic, partition), epoch, reg)


def _roles() -> tuple[CoordinatorRoles, Recorder]:
    roles, rec = CoordinatorRoles(), Recorder()
    roles.register(OFFSETS, rec)
    return roles, rec


def test_one_election_per_term_and_resignation_on_follow():
    roles, rec = _roles()
    roles.apply([_lead(3, 5), _lead(3, 5)])  # the second: an ISR change in the same term
    assert rec.calls == [("elect", 3, 5)]
    roles.apply([BecomeFollower(TopicPartition(OFFSETS, 3), 2, 6)])
    assert rec.calls[-1] == ("resign", 3, 6)
    roles.apply([BecomeFollower(TopicPartition(OFFSETS, 3), 2, 6)])  # not led any more: nothing to resign
    assert len(rec.calls) == 2


def test_stale_election_is_ignored():
    roles, rec = _roles()
    roles.apply([BecomeFollower(TopicPartition(OFFSETS, 0), 2, 7)])
    roles.apply([_lead(0, 6)])
    assert rec.calls == []
    roles.apply([_lead(0, 8)])
    assert rec.calls == [("elect", 0, 8)]


def test_new_term_while_leading_reloads():
    roles, rec = _roles()
    roles.apply([_lead(1, 1), _lead(1, 2)])
    assert rec.calls == [("elect", 1, 1), ("resign", 1, 1), ("elect", 1, 2)]


def test_stop_replica_and_lease_loss_resign():
    roles, rec = _roles()
    roles.apply([_lead(1, 1), _lead(2, 1), _lead(9, 1, topic="other")])
    roles.apply([StopReplica(TopicPartition(OFFSETS, 1))])
    assert rec.calls[-1] == ("resign", 1, None)
    roles.resign_all()
    assert rec.calls[-2:] == [("resign", 1, None), ("resign", 2, None)]
    roles.apply([BecomeFollower(TopicPartition(OFFSETS, 2), 2, 2)])  # nothing led any more
    roles.resign_all()
    assert len(rec.calls) == 4
