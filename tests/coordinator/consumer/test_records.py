"""KIP-848 records byte for byte as Kafka 4 writes them (GroupCoordinatorRecordHelpers with the
group-coordinator/src/main/resources/common/message/ConsumerGroup*.json definitions): key = int16 record
type + the key struct (not flexible); value = int16 version 0 + the flexible value struct."""
from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.member import UNREVOKED_PARTITIONS, ConsumerGroupMember

T = uuid.UUID("00000000-0000-0000-0000-0000000000aa")


def test_group_epoch_record():
    key, value, _ = r.group_epoch_record("g", 5)
    assert key == b"\x00\x03" + b"\x00\x01g"
    assert value == b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00"  # epoch, no tagged fields


def test_current_assignment_record():
    member = ConsumerGroupMember("m", member_epoch=3, previous_member_epoch=2, state=UNREVOKED_PARTITIONS,
                                 assigned_partitions={T: frozenset({1})}, partitions_pending_revocation={T: frozenset({2, 0})})
    key, value, _ = r.current_assignment_record("g", member)
    assert key == b"\x00\x08" + b"\x00\x01g" + b"\x00\x01m"
    ints = lambda xs: bytes([len(xs) + 1]) + b"".join(x.to_bytes(4, "big") for x in xs)  # noqa: E731

    def topic_partitions(partitions, epochs):  # KIP-1251: AssignmentEpochs, tag 0, one per partition
        tagged = ints(epochs)
        return T.bytes + ints(partitions) + b"\x01" + b"\x00" + bytes([len(tagged)]) + tagged

    assert value == (b"\x00\x00" + (3).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\x01"
                     + b"\x02" + topic_partitions([1], [3]) + b"\x02" + topic_partitions([0, 2], [3, 3]) + b"\x00")
    assert r.decode(key, value).value.assigned_partitions[0].assignment_epochs == [3]  # the codec reads it back
    moved = member.replace(previous_member_epoch=3, member_epoch=5, assigned_partitions={T: frozenset({1, 4})},
                           partitions_pending_revocation={})
    assert moved.assignment_epochs == {T: {1: 3, 4: 5}}  # kept, newly assigned
    _, value, _ = r.current_assignment_record("g", moved)
    assert value == (b"\x00\x00" + (5).to_bytes(4, "big") + (3).to_bytes(4, "big") + b"\x01"
                     + b"\x02" + topic_partitions([1, 4], [3, 5]) + b"\x01" + b"\x00")
    assert r.assignment_epochs_of(r.decode(key, value).value) == {T: {1: 3, 4: 5}}


def test_member_metadata_record_and_tombstones():
    member = ConsumerGroupMember("m", client_id="c", client_host="/h", subscribed_topic_names=frozenset({"t"}),
                                 rebalance_timeout_ms=7)
    key, value, _ = r.member_subscription_record("g", member)
    assert key == b"\x00\x05\x00\x01g\x00\x01m"
    # instance id null, rack id null, "c", "/h", ["t"], regex null, 7, assignor null, no tagged fields
    assert value == b"\x00\x00" + b"\x00" + b"\x00" + b"\x02c" + b"\x03/h" + b"\x02\x02t" + b"\x00" + \
        (7).to_bytes(4, "big") + b"\x00" + b"\x00"
    assert [(k[:2], v) for k, v, _ in r.member_removal("g", "m")] == [(b"\x00\x08", None), (b"\x00\x07", None),
                                                                       (b"\x00\x05", None)]
    decoded = r.decode(key, value)
    assert (decoded.type, decoded.group_id, decoded.member_id, decoded.value.subscribed_topic_names) == \
        (r.MEMBER_METADATA, "g", "m", ["t"])


@settings(max_examples=200, deadline=None)
@given(rtype=st.sampled_from(sorted(r.RECORD_TYPES - {r.REGULAR_EXPRESSION})), group=st.text(max_size=40),
       member=st.text(max_size=40))
def test_keys_are_the_codecs_keys(rtype, group, member):
    """records._key builds the non-flexible keys itself; the bytes are the generated codec's."""
    member_id = member if rtype in r._MEMBER_KEYED else None
    assert r._key.__wrapped__(rtype, group, member_id) == r._codec_key(rtype, group, member_id)
