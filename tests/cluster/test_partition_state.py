"""PartitionRegistration: invariants and the stored JSON value (Kafka's PartitionRecord field names)."""
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.cluster.partition_state import (
    NO_LEADER,
    InvalidRegistration,
    LeaderRecoveryState,
    PartitionRegistration,
    initial_registration,
)

from .strategies import registrations

REG = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2), leader=1, leader_epoch=4, partition_epoch=9,
                            adding_replicas=(3,))


def test_json_uses_partition_record_names():
    """metadata/src/main/resources/common/metadata/PartitionRecord.json, as Kafka's JSON converters name
    its fields (camelCase), leaving out partitionId / topicId which the key carries."""
    assert REG.to_json() == {
        "replicas": [1, 2, 3], "isr": [1, 2], "removingReplicas": [], "addingReplicas": [3], "leader": 1,
        "leaderRecoveryState": 0, "leaderEpoch": 4, "partitionEpoch": 9,
    }
    assert PartitionRegistration.decode(REG.encode()) == REG


def test_leader_recovery_state_may_be_absent():
    """LeaderRecoveryState is a tagged field of PartitionRecord (default 0 = RECOVERED)."""
    doc = REG.to_json()
    del doc["leaderRecoveryState"]
    assert PartitionRegistration.from_json(doc).leader_recovery_state is LeaderRecoveryState.RECOVERED


@pytest.mark.parametrize("edit, why", [
    ({"leaderEpoch": None}, "integer"),
    ({"isr": [1, "2"]}, "list of broker ids"),
    ({"leader": True}, "integer"),
    ({"leaderRecoveryState": 2}, "neither 0 nor 1"),
    ({"eligibleLeaderReplicas": []}, "unknown"),
    ({"isr": [1, 4]}, "isr must be distinct replicas"),
    ({"leader": 3}, "leader must be in the ISR"),
    ({"replicas": [1, 1, 2, 3]}, "replicas must be distinct"),
    ({"removingReplicas": [3]}, "both added and removed"),
])
def test_a_bad_value_is_refused_where_it_is_read(edit, why):
    doc = {**REG.to_json(), **edit}
    with pytest.raises(InvalidRegistration, match=why):
        PartitionRegistration.from_json(doc)


def test_missing_fields_and_non_json_are_refused():
    doc = REG.to_json()
    del doc["partitionEpoch"]
    with pytest.raises(InvalidRegistration, match="lacks"):
        PartitionRegistration.from_json(doc)
    with pytest.raises(InvalidRegistration, match="JSON"):
        PartitionRegistration.decode(b"{nope")
    with pytest.raises(InvalidRegistration, match="object"):
        PartitionRegistration.decode(json.dumps([1]))


def test_what_kafka_derives():
    """PartitionRegistration.hasLeader / preferredReplica / hasPreferredLeader and
    PartitionReassignmentReplicas.isReassignmentInProgress / originalReplicas."""
    assert REG.has_leader and REG.preferred_replica == 1 and REG.has_preferred_leader
    assert REG.is_reassigning and REG.original_replicas == (1, 2)
    led_by_2 = REG.changed(leader=2)
    assert not led_by_2.has_preferred_leader
    assert not REG.changed(leader=NO_LEADER).has_leader


def test_initial_registration():
    """ReplicationControlManager.createTopic -> buildPartitionRegistration: ISR = live replicas in order,
    the first of them leads, epochs 0."""
    reg = initial_registration([3, 1, 2], live_brokers={1, 2})
    assert (reg.replicas, reg.isr, reg.leader, reg.leader_epoch, reg.partition_epoch) == ((3, 1, 2), (1, 2), 1, 0, 0)
    with pytest.raises(InvalidRegistration):
        initial_registration([3], live_brokers={1})


@given(registrations())
def test_encode_decode_round_trip(reg):
    assert PartitionRegistration.decode(reg.encode()) == reg


@given(st.dictionaries(st.sampled_from(sorted(REG.to_json())), st.integers(-3, 3) | st.lists(st.integers(-1, 4))))
def test_decode_never_crashes_otherwise(doc):
    try:
        PartitionRegistration.from_json({**REG.to_json(), **doc})
    except InvalidRegistration:
        pass
