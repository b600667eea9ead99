"""Where a new partition's replicas go, and the checks of an assignment a client chose itself.

Placement is Kafka 4's controller placer, `StripedReplicaPlacer`
(metadata/src/main/java/org/apache/kafka/metadata/placement/StripedReplicaPlacer.java), which
ReplicationControlManager.createTopic / createPartitions use for CreateTopics and CreatePartitions:

- The usable brokers are the registered ones not in controlled shutdown; fenced ones count but are only
  taken once a rack has no unfenced broker left, and never as the first replica (the leader).
- Brokers are grouped by rack (brokers without `broker.rack` form one rack of their own), racks sorted
  by name, brokers in a rack sorted by id. Each rack and the rack list get a random starting offset.
- Each partition takes its racks round-robin from the rack list's offset, so consecutive replicas sit
  on different racks (the rack-alternating order) until every rack has one; within a rack, brokers
  are also taken round-robin. Each partition advances every offset by one: the "striped" pattern.
  After as many partitions as there are unfenced brokers, racks and brokers are shuffled.
- Replicas of one partition are distinct brokers; they span min(replication factor, racks) racks.

The random source is a `random.Random` the caller passes: seeded, placement is deterministic. Draws are
made in Kafka's order (a starting offset per rack's fenced then unfenced list, in rack-name order, then
the rack list's), so a source that draws as Java's `Random` does reproduces Kafka's lists exactly
(tests/cluster/test_replica_placement.py checks Kafka's own expected placements that way).

Leader spread: Kafka's placer gives each unfenced broker one leadership per round of as many partitions
as there are unfenced brokers when all brokers share one rack (or none has a rack), and each rack an
even share when racks are used; within a rack the share can be uneven (two racks of two brokers, RF 2:
a round of four partitions leads twice on one broker of each rack), until the next shuffle. kcoord keeps
Kafka's rule rather than a better one so that a cluster looks as Kafka's would.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kcoord.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class UsableBroker:
    """A broker that may receive replicas (ClusterDescriber.usableBrokers): registered, not shutting
    down; `fenced` while its registration is not live (it may follow but not lead a new partition)."""

    id: int
    rack: str | None = None
    fenced: bool = False


class RandomSource(Protocol):
    """What the placer draws: `random.Random` serves (tests also pass one that draws as Java's does)."""

    def randrange(self, stop: int) -> int: ...

    def shuffle(self, x: list[int | str | None]) -> None: ...


class PlacementError(Exception):
    """An assignment Kafka refuses, with the error code CreateTopics / CreatePartitions answer."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _BrokerCycle:
    """StripedReplicaPlacer.BrokerList: one rack's brokers of one kind (fenced or not), handed out
    round-robin from an offset that moves by one for each new placement round (`epoch`)."""

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = 0  # how many were handed out in this round
        self.offset = 0
        self.epoch = 0

    def initialize(self, rng: RandomSource) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int | None:
        if not self.brokers:
            return None
        if epoch != self.epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return None
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


class _Rack:
    def __init__(self) -> None:
        self.unfenced = _BrokerCycle()
        self.fenced = _BrokerCycle()

    def next(self, epoch: int) -> int | None:
        """An unfenced broker while the rack has one left in this round, then a fenced one."""
        broker = self.unfenced.next(epoch)
        return broker if broker is not None else self.fenced.next(epoch)


class _RackList:
    """StripedReplicaPlacer.RackList: the racks, iterated round-robin from an offset."""

    def __init__(self, rng: RandomSource, brokers: Iterable[UsableBroker]) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        self.total = self.unfenced = 0
        for broker in brokers:
            rack = self.racks.setdefault(broker.rack, _Rack())
            (rack.fenced if broker.fenced else rack.unfenced).brokers.append(broker.id)
            self.total += 1
            self.unfenced += not broker.fenced
        # no rack sorts first, as Kafka's OptionalStringComparator orders Optional.empty()
        self.names: list[str | None] = sorted(self.racks, key=lambda name: (name is not None, name or ""))
        self.in_order = [self.racks[name] for name in self.names]  # for random draws: never shuffled
        for rack in self.in_order:
            rack.fenced.initialize(rng)
            rack.unfenced.initialize(rng)
        self.epoch = 0
        self.offset = rng.randrange(len(self.names)) if self.names else 0

    def place(self, replication_factor: int) -> tuple[int, ...]:
        if self.epoch == self.unfenced and self.unfenced > 1:
            self._shuffle()  # a full round: mix the order so the next round does not repeat it
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        # the leader: the first unfenced broker from the offset's rack onwards
        first_rack = self.offset
        while True:
            leader = self.racks[self.names[first_rack]].unfenced.next(self.epoch)
            if leader is not None:
                break
            first_rack = (first_rack + 1) % len(self.names)
        chosen = [leader]
        rack_index = self.offset
        skip = first_rack  # the leader's rack is skipped once, on the first pass
        while len(chosen) < replication_factor:
            broker = None
            while broker is None:
                if rack_index == skip:
                    skip = -1
                else:
                    broker = self.racks[self.names[rack_index]].next(self.epoch)
                rack_index = (rack_index + 1) % len(self.names)
            chosen.append(broker)
        self.epoch += 1
        self.offset += 1
        return tuple(chosen)

    def _shuffle(self) -> None:
        self.rng.shuffle(self.names)
        for rack in self.in_order:
            self.rng.shuffle(rack.fenced.brokers)
            self.rng.shuffle(rack.unfenced.brokers)


def place_replicas(
    brokers: Iterable[UsableBroker],
    num_partitions: int,
    replication_factor: int,
    rng: RandomSource,
) -> list[tuple[int, ...]]:
    """Replica lists (first = preferred leader) for `num_partitions` new partitions
    (StripedReplicaPlacer.place). Raises PlacementError(INVALID_REPLICATION_FACTOR) when the factor is
    not positive, no usable broker is unfenced, or the factor exceeds the usable brokers."""
    racks = _RackList(rng, brokers)
    if replication_factor <= 0:
        raise PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Invalid replication factor {replication_factor}: it must be positive.")
    if racks.unfenced == 0:
        raise _unreplicable(replication_factor, "every broker is fenced.")
    if replication_factor > racks.total:
        raise _unreplicable(replication_factor, f"it needs {replication_factor} brokers and only "
                                                f"{racks.total} broker(s) are registered.")
    return [racks.place(replication_factor) for _ in range(num_partitions)]


def _unreplicable(replication_factor: int, why: str) -> PlacementError:
    # ReplicationControlManager.createTopic prefixes the placer's reason the same way
    return PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR,
                          f"Unable to replicate the partition {replication_factor} time(s): {why}")


# -- manual assignments -------------------------------------------------------------------------------


def validate_replica_list(
    replicas: Sequence[int], registered_brokers: Collection[int], replication_factor: int | None = None
) -> str | None:
    """Why one manual replica list is refused, or None (ReplicationControlManager.
    validateManualPartitionAssignment): empty, a broker that is not registered, a broker twice, or a
    length other than the partitions before it have. Each refusal is INVALID_REPLICA_ASSIGNMENT."""
    if not replicas:
        return "The manual assignment of a partition lists no replica."
    seen: set[int] = set()
    for broker in sorted(replicas):
        if broker not in registered_brokers:
            return f"The manual assignment names broker {broker}, which is not registered."
        if broker in seen:
            return f"The manual assignment names broker {broker} more than once."
        seen.add(broker)
    if replication_factor is not None and len(replicas) != replication_factor:
        return (f"The manual assignment gives a partition {len(replicas)} replica(s) where the other "
                f"partitions have {replication_factor}.")
    return None


def check_manual_assignments(
    assignments: Sequence[tuple[int, Sequence[int]]],
    registered_brokers: Collection[int],
    live_brokers: Collection[int],
) -> list[tuple[int, ...]]:
    """CreateTopics' replica assignments [(partition index, broker ids)], checked as
    ReplicationControlManager.createTopic does, returned as replica lists by partition index.
    Raises PlacementError(INVALID_REPLICATION_ASSIGNMENT) for an index given twice, a bad replica list,
    a partition with no live replica, or indices that are not 0..n-1."""
    by_index: dict[int, tuple[int, ...]] = {}
    replication_factor: int | None = None
    for index, replicas in assignments:
        if index in by_index:
            raise _bad_assignment(f"Partition {index} is assigned more than once.")
        _check_one(replicas, registered_brokers, live_brokers, replication_factor, index)
        replication_factor = len(replicas)
        by_index[index] = tuple(replicas)
    if sorted(by_index) != list(range(len(by_index))):
        raise _bad_assignment("The assigned partitions must be numbered from 0 without gaps.")
    return [by_index[i] for i in range(len(by_index))]


def check_added_assignments(
    assignments: Sequence[Sequence[int]],
    added: int,
    replication_factor: int,
    first_partition: int,
    registered_brokers: Collection[int],
    live_brokers: Collection[int],
) -> list[tuple[int, ...]]:
    """CreatePartitions' assignments for the `added` new partitions (the first is `first_partition`),
    checked as ReplicationControlManager.createPartitions does: one list per new partition, each as long
    as the topic's replication factor, valid, and with a live replica."""
    if len(assignments) != added:
        raise _bad_assignment(f"{added} partition(s) are being added, but {len(assignments)} "
                              "assignment(s) were given.")
    for offset, replicas in enumerate(assignments):
        _check_one(replicas, registered_brokers, live_brokers, replication_factor, first_partition + offset)
    return [tuple(replicas) for replicas in assignments]


def _check_one(replicas: Sequence[int], registered: Collection[int], live: Collection[int],
               replication_factor: int | None, index: int) -> None:
    problem = validate_replica_list(replicas, registered, replication_factor)
    if problem:
        raise _bad_assignment(problem)
    if not any(broker in live for broker in replicas):
        raise _bad_assignment(f"Every broker assigned to partition {index} is fenced or in controlled "
                              "shutdown.")


def _bad_assignment(message: str) -> PlacementError:
    return PlacementError(ErrorCode.INVALID_REPLICATION_ASSIGNMENT, message)
