"""The records a consumer group writes carry their decoded form (records.Written), which the live path
replays instead of decoding the bytes; a load decodes the bytes. For every record factory: the bytes are
the generic codec's (coordinator/consumer/record_values.py encodes the assignment records itself), and
replaying the carried form leaves a group exactly as replaying the decoded bytes does."""
from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.coordinator.consumer.member import ClassicMemberMetadata, ConsumerGroupMember
from kcoord.protocol import messages as m

TOPICS = [uuid.UUID(int=i * 0x1234567) for i in range(1, 5)]
assignments = st.dictionaries(st.sampled_from(TOPICS), st.frozensets(st.integers(0, 300), max_size=140), max_size=4)
STATE_FIELDS = ("group_epoch", "assignment_epoch", "members", "static_members", "target_assignment",
                "subscription_metadata", "partition_epochs", "has_metadata_record", "topic_counts", "regexes",
                "assignor_counts", "num_classic_members")


def _generic(rtype: int, value) -> bytes:
    """The value as the generated codec encodes it (what records.py used for every record)."""
    cls = r._cls(rtype)
    def tps(struct, tps_):
        return [struct(topic_id=t, partitions=sorted(p)) for t, p in tps_]
    if rtype == r.TARGET_MEMBER:
        msg = cls(topic_partitions=tps(cls.TopicPartition, value.topic_partitions))
    else:  # with KIP-1251's assignment epochs, in the partitions' order
        def with_epochs(tps_):
            return [cls.TopicPartitions(topic_id=t, partitions=sorted(p),
                                        assignment_epochs=[value.epochs[t][q] for q in sorted(p)]) for t, p in tps_]
        msg = cls(member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                  state=value.state, assigned_partitions=with_epochs(value.assigned_partitions),
                  partitions_pending_revocation=with_epochs(value.partitions_pending_revocation))
    return m.encode_versioned(f"ConsumerGroup{r._NAMES[rtype]}Value", msg, 0)


def _state(group: ConsumerGroup) -> dict:
    state = {name: getattr(group, name) for name in STATE_FIELDS}
    state["assignment_epochs"] = {mid: member.assignment_epochs for mid, member in group.members.items()}
    return state


def _replay_both(records: list) -> tuple[dict, dict]:
    carried, decoded = ConsumerGroup("g"), ConsumerGroup("g")
    for record in records:
        carried.replay(record.decoded)
        decoded.replay(r.decode(record[0], record[1]))
    return _state(carried), _state(decoded)


@settings(max_examples=150, deadline=None)
@given(assigned=assignments, revoking=assignments, target=assignments, epoch=st.integers(-2, 2**31 - 1),
       previous=st.integers(-1, 2**31 - 1), state=st.sampled_from([0, 1, 2, 127]))
def test_assignment_records_bytes_and_replay(assigned, revoking, target, epoch, previous, state):
    revoking = {t: p - assigned.get(t, frozenset()) for t, p in revoking.items()}
    member = ConsumerGroupMember("m", member_epoch=epoch, previous_member_epoch=previous, state=state,
                                 assigned_partitions=assigned, partitions_pending_revocation=revoking)
    current = r.current_assignment_record("g", member)
    target_record = r.target_member_record("g", "m", target)
    assert current[1] == _generic(r.CURRENT_ASSIGNMENT, current.decoded.value)
    assert target_record[1] == _generic(r.TARGET_MEMBER, target_record.decoded.value)
    carried, decoded = _replay_both([r.member_subscription_record("g", member), current, target_record])
    assert carried == decoded


def test_every_factory_replays_as_its_bytes():
    member = ConsumerGroupMember("m", instance_id="i", rack_id="r", client_id="c", client_host="/h",
                                 subscribed_topic_names=frozenset({"a", "b"}), subscribed_topic_regex="x.*",
                                 server_assignor_name="range", rebalance_timeout_ms=9,
                                 assigned_partitions={TOPICS[0]: frozenset({1, 2})}, member_epoch=4,
                                 previous_member_epoch=3)
    classic = member.replace(member_id="k", instance_id=None, classic=ClassicMemberMetadata(
        45000, (("range", b"\x00\x01"), ("roundrobin", b""))), assigned_partitions={TOPICS[1]: frozenset({0})})
    records = [
        r.group_epoch_record("g", 7, "member_joined", "why", "m"),
        r.subscription_metadata_record("g", {"a": (TOPICS[0], 3), "b": (TOPICS[1], 1)}),
        r.member_subscription_record("g", member), r.member_subscription_record("g", classic),
        r.target_member_record("g", "m", {TOPICS[0]: frozenset({1, 2})}), r.target_epoch_record("g", 7),
        r.current_assignment_record("g", member), r.current_assignment_record("g", classic),
    ]
    carried, decoded = _replay_both(records)
    assert carried == decoded and carried["assignor_counts"] == {"range": 2} and carried["num_classic_members"] == 1
    gone = r.member_removal("g", "m") + r.member_removal("g", "k") + r.group_deletion("g")
    carried, decoded = _replay_both(records + gone)
    assert carried == decoded and not carried["members"] and not carried["has_metadata_record"]
    for record in records + gone:  # the carried key and type are the key's
        assert r.decode(record[0], record[1])[:3] == record.decoded[:3]
