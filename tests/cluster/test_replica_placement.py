"""Replica placement (metadata/src/main/java/org/apache/kafka/metadata/placement/StripedReplicaPlacer.java)
and the checks of manual assignments (ReplicationControlManager.createTopic, createPartitions,
validateManualPartitionAssignment)."""
import collections
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.cluster.replica_placement import (
    PlacementError,
    UsableBroker,
    _RackList,
    check_added_assignments,
    check_manual_assignments,
    place_replicas,
    validate_replica_list,
)
from kcoord.protocol.errors import ErrorCode

from .java_random import KafkaMockRandom

B = UsableBroker


def rack_list(*brokers):
    return _RackList(KafkaMockRandom(), brokers)


# -- Kafka's own expected placements, drawn as Java draws ------------------------------------------------

def test_single_rack_avoids_fenced_brokers():
    """StripedReplicaPlacerTest.testAvoidFencedReplicaIfPossibleOnSingleRack."""
    racks = rack_list(B(3), B(1, fenced=True), B(0), B(4), B(2))
    assert [racks.place(4) for _ in range(5)] == [(3, 4, 0, 2), (4, 0, 2, 3), (0, 2, 3, 4), (2, 3, 4, 0), (0, 4, 3, 2)]


def test_fenced_broker_used_when_needed_but_never_as_leader():
    """StripedReplicaPlacerTest.testPlacementOnFencedReplicaOnSingleRack and
    testMultiPartitionTopicPlacementOnSingleUnfencedBroker."""
    racks = rack_list(B(3), B(1, fenced=True), B(2))
    assert [racks.place(3) for _ in range(4)] == [(3, 2, 1), (2, 3, 1), (3, 2, 1), (2, 3, 1)]
    assert place_replicas([B(0), B(1, fenced=True)], 3, 1, KafkaMockRandom()) == [(0,), (0,), (0,)]


def test_several_racks():
    """StripedReplicaPlacerTest.testRackListWithMultipleRacks and testRackListWithInvalidRacks."""
    racks = rack_list(B(11, "1"), B(10, "1"), B(30, "3"), B(31, "3"), B(21, "2"), B(20, "2", True))
    assert racks.names == ["1", "2", "3"]
    assert [racks.place(4) for _ in range(3)] == [(11, 21, 31, 10), (21, 30, 10, 20), (31, 11, 21, 30)]
    racks = rack_list(B(11, "1"), B(10, "1"), B(30, "3", True), B(31, "3", True), B(20, "2", True),
                      B(21, "2", True), B(41, "4"), B(40, "4", True))
    assert [racks.place(4) for _ in range(3)] == [(41, 11, 21, 30), (10, 20, 31, 41), (41, 21, 30, 11)]


def test_whole_topics():
    """StripedReplicaPlacerTest.testSuccessfulPlacement and testEvenDistribution."""
    brokers = [B(0), B(3), B(2), B(1)]
    assert place_replicas(brokers, 5, 3, KafkaMockRandom()) == [(2, 3, 0), (3, 0, 1), (0, 1, 2), (1, 2, 3), (1, 0, 2)]
    counts = collections.Counter(place_replicas([B(0), B(1), B(2), B(3)], 200, 2, KafkaMockRandom()))
    assert counts == {(0, 1): 14, (0, 2): 22, (0, 3): 14, (1, 0): 17, (1, 2): 17, (1, 3): 16,
                      (2, 0): 13, (2, 1): 17, (2, 3): 20, (3, 0): 20, (3, 1): 19, (3, 2): 11}


def test_no_rack_sorts_first():
    """RackList sorts rack names with OptionalStringComparator: Optional.empty() first."""
    assert rack_list(B(1, "b"), B(2), B(3, "a")).names == [None, "a", "b"]


# -- INVALID_REPLICATION_FACTOR -------------------------------------------------------------------

@pytest.mark.parametrize("brokers, rf, says", [
    ([B(1), B(2)], 0, "must be positive"),
    ([B(1), B(2)], -1, "must be positive"),
    ([B(1, fenced=True), B(2, fenced=True)], 1, "every broker is fenced"),
    ([B(1), B(2)], 3, "Unable to replicate the partition 3 time(s): it needs 3 brokers and only 2 broker(s) are registered"),
    ([], 1, "every broker is fenced"),
])
def test_invalid_replication_factor(brokers, rf, says):
    """StripedReplicaPlacer.place: throwInvalidReplicationFactorIfNonPositive / IfZero / IfTooFewBrokers
    (in that order), prefixed as ReplicationControlManager.createTopic words it."""
    with pytest.raises(PlacementError) as info:
        place_replicas(brokers, 1, rf, random.Random(0))
    assert info.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert says in info.value.message


# -- manual assignments ---------------------------------------------------------------------------

REGISTERED = {1, 2, 3, 4}


@pytest.mark.parametrize("replicas, rf, says", [
    ((), None, "no replica"),
    ((1, 5), None, "broker 5, which is not registered"),
    ((1, 2, 1), None, "broker 1 more than once"),
    ((1, 2), 3, "2 replica(s) where the other partitions have 3"),
])
def test_validate_replica_list(replicas, rf, says):
    """ReplicationControlManager.validateManualPartitionAssignment."""
    assert says in validate_replica_list(replicas, REGISTERED, rf)


def test_validate_replica_list_accepts():
    assert validate_replica_list((3, 1), REGISTERED) is None
    assert validate_replica_list((3, 1), REGISTERED, 2) is None


@pytest.mark.parametrize("assignments, says", [
    ([(0, [1, 2]), (0, [2, 3])], "Partition 0 is assigned more than once"),
    ([(0, [1, 2]), (1, [2])], "1 replica(s) where the other partitions have 2"),
    ([(0, [1, 2]), (2, [2, 3])], "numbered from 0 without gaps"),
    ([(0, [4])], "Every broker assigned to partition 0 is fenced or in controlled shutdown"),
    ([(0, [9])], "broker 9, which is not registered"),
])
def test_create_topics_manual_assignments_refused(assignments, says):
    """ReplicationControlManager.createTopic with assignments: INVALID_REPLICA_ASSIGNMENT."""
    with pytest.raises(PlacementError) as info:
        check_manual_assignments(assignments, REGISTERED, live_brokers={1, 2, 3})
    assert info.value.code is ErrorCode.INVALID_REPLICATION_ASSIGNMENT
    assert says in info.value.message


def test_create_topics_manual_assignments_accepted_in_partition_order():
    assert check_manual_assignments([(1, [2, 3]), (0, [4, 1])], REGISTERED, {1, 2, 3}) == [(4, 1), (2, 3)]


def test_create_partitions_assignments():
    """ReplicationControlManager.createPartitions: one list per added partition, as long as the topic's
    replication factor, each with a live broker."""
    assert check_added_assignments([[1, 2]], 1, 2, 3, REGISTERED, {1, 2}) == [(1, 2)]
    for assignments, says in [([[1, 2]], "2 partition(s) are being added, but 1"),
                              ([[1], [2]], "1 replica(s) where the other partitions have 2"),
                              ([[1, 2], [3, 4]], "partition 4 is fenced")]:
        with pytest.raises(PlacementError, match=r".") as info:
            check_added_assignments(assignments, 2, 2, 3, REGISTERED, {1, 2})
        assert says in info.value.message and info.value.code is ErrorCode.INVALID_REPLICATION_ASSIGNMENT


# -- properties -----------------------------------------------------------------------------------

@st.composite
def clusters(draw, racks=True):
    ids = draw(st.lists(st.integers(0, 40), min_size=1, max_size=12, unique=True))
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d", None]), min_size=len(ids), max_size=len(ids))) \
        if racks else [None] * len(ids)
    fenced = draw(st.lists(st.booleans(), min_size=len(ids), max_size=len(ids)))
    if all(fenced):
        fenced[0] = False
    return [B(i, rack, f) for i, rack, f in zip(ids, names, fenced, strict=True)]


@settings(max_examples=300)
@given(clusters(), st.integers(1, 60), st.data(), st.integers(0, 2**32))
def test_placement_properties(brokers, partitions, data, seed):
    """Every partition: distinct brokers, an unfenced leader, as many racks as the factor allows;
    the same seed gives the same placement."""
    rf = data.draw(st.integers(1, len(brokers)))
    placed = place_replicas(brokers, partitions, rf, random.Random(seed))
    assert placed == place_replicas(brokers, partitions, rf, random.Random(seed))
    by_id = {b.id: b for b in brokers}
    racks = {b.rack for b in brokers}
    assert len(placed) == partitions
    for replicas in placed:
        assert len(replicas) == rf and len(set(replicas)) == rf
        assert not by_id[replicas[0]].fenced
        assert len({by_id[r].rack for r in replicas}) == min(rf, len(racks))


@settings(max_examples=300)
@given(clusters(racks=False), st.integers(1, 60), st.data(), st.integers(0, 2**32))
def test_leaders_are_even_without_racks(brokers, partitions, data, seed):
    """Without racks (one rack list) leadership goes round-robin over the unfenced brokers, a shuffle
    after each full round: leader counts differ by at most one."""
    rf = data.draw(st.integers(1, len(brokers)))
    leaders = collections.Counter(r[0] for r in place_replicas(brokers, partitions, rf, random.Random(seed)))
    counts = [leaders.get(b.id, 0) for b in brokers if not b.fenced]
    assert max(counts) - min(counts) <= 1


def test_leaders_with_racks_follow_kafka_not_round_robin():
    """With racks Kafka's placer does not promise even leaders: two racks of two brokers, RF 2, a round
    of four partitions leads twice on one broker of each rack and never on the other (each rack's
    broker offset moves once per partition, and each rack leads every other partition). Pinned so a
    change of rule is a decision, not an accident."""
    brokers = [B(0, "a"), B(1, "a"), B(2, "b"), B(3, "b")]
    leaders = collections.Counter(r[0] for r in place_replicas(brokers, 4, 2, random.Random(7)))
    assert sorted(leaders.values()) == [2, 2]
