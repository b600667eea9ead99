"""LeaveGroup (the classic API) aimed at a consumer group, as Kafka 4's GroupMetadataManager answers it:
classicGroupLeaveToConsumerGroup (KAFKA-18188: any member, whichever protocol it uses, by member id or by
instance id with member id "" for an admin's removal; each answer echoes the request's identity) and
consumerGroupFenceMembers (KAFKA-18150: the members go together, one epoch bump; the last consumer-protocol
members leaving classic ones behind downgrade the group)."""
from __future__ import annotations

from kcoord.coordinator.consumer import records as cr
from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.coordinator.group_state import GroupState
from kcoord.protocol.errors import ErrorCode
from tests.coordinator.consumer.test_migration import classic_group, record_kinds

E = ErrorCode


def mixed(instance_id="c-1"):
    """A consumer group of two classic members (upgraded) and one consumer-protocol static member."""
    ctx = ConsumerGroupContext(topics={"foo": 6}, group_initial_rebalance_delay_ms=0)
    a, b = classic_group(ctx)
    c = ctx.heartbeat("g", "", 0, topics=["foo"], instance_id=instance_id)
    assert c.error == E.NONE
    return ctx, a, b, c


def answers(result):
    return [(x.member_id, x.group_instance_id, x.error) for x in result.members]


def test_an_admin_removes_a_consumer_protocol_static_member_by_instance_id():
    """member id "" + instance id: throwIfStaticMemberIsUnknown passes, the fenced check is skipped (an admin's
    removal), and no throwIfMemberDoesNotUseClassicProtocol any more: the consumer-protocol member goes, the answer
    carries the request's member id (""), and the epoch is bumped once."""
    ctx, a, b, c = mixed()
    d = ctx.heartbeat("g", "", 0, topics=["foo"])  # a second consumer-protocol member: no downgrade here
    epoch = ctx.consumer_group("g").group_epoch
    before = len(ctx.writer.records)
    got = ctx.leave_async("g", ("", "c-1", None))
    assert got.error == E.NONE and answers(got) == [("", "c-1", E.NONE)]
    group = ctx.consumer_group("g")
    assert c.member_id not in group.members and {a, b, d.member_id} <= set(group.members)
    assert group.group_epoch == epoch + 1
    written = ctx.writer.records[before:]
    kinds = record_kinds(written)
    assert (cr.GROUP_METADATA, False) == kinds[-1]  # the epoch bump, last
    assert kinds.count((cr.MEMBER_METADATA, True)) == 1  # c's subscription tombstone


def test_a_consumer_protocol_member_named_by_member_id_leaves():
    """instanceId null: getOrMaybeCreateMember(memberId, false) finds the member, whatever its protocol."""
    ctx, a, b, c = mixed(instance_id=None)
    d = ctx.heartbeat("g", "", 0, topics=["foo"])
    got = ctx.leave_async("g", (c.member_id, None, "admin"))
    assert answers(got) == [(c.member_id, None, E.NONE)]
    assert c.member_id not in ctx.consumer_group("g").members and d.member_id in ctx.consumer_group("g").members


def test_per_member_errors_write_nothing():
    """UNKNOWN_MEMBER_ID (getOrMaybeCreateMember; throwIfStaticMemberIsUnknown), FENCED_INSTANCE_ID
    (throwIfInstanceIdIsFenced when a member id is given); nobody valid: consumerGroupFenceMembers writes nothing
    and does not bump the epoch."""
    ctx, a, b, c = mixed()
    epoch = ctx.consumer_group("g").group_epoch
    before = len(ctx.writer.records)
    got = ctx.leave_async("g", ("ghost", None, None), ("", "nobody", None), ("someone-else", "c-1", None))
    assert got.error == E.NONE
    assert answers(got) == [("ghost", None, E.UNKNOWN_MEMBER_ID), ("", "nobody", E.UNKNOWN_MEMBER_ID),
                            ("someone-else", "c-1", E.FENCED_INSTANCE_ID)]
    assert len(ctx.writer.records) == before and ctx.consumer_group("g").group_epoch == epoch


def test_removing_the_last_consumer_protocol_member_downgrades():
    """KAFKA-18150: validateOnlineDowngradeWithFencedMembers -> convertToClassicGroup with the leaving members
    (ClassicGroup.fromConsumerGroup leaves them all out): removing the static consumer-protocol member and one
    classic member in one request leaves a classic group of the other classic member, rebalancing."""
    ctx, a, b, c = mixed()
    got = ctx.leave_async("g", ("", "c-1", None), (b, None, None))
    assert answers(got) == [("", "c-1", E.NONE), (b, None, E.NONE)]
    assert ctx.consumer_group("g") is None
    classic = ctx.group("g")
    assert list(classic.members) == [a] and classic.is_(GroupState.PREPARING_REBALANCE)


def test_everyone_leaving_does_not_downgrade():
    """validateOnlineDowngradeWithFencedMembers: no member would remain ("it's empty"): the consumer group stays,
    empty, at the next epoch."""
    ctx, a, b, c = mixed()
    epoch = ctx.consumer_group("g").group_epoch
    got = ctx.leave_async("g", (a, None, None), (b, None, None), ("", "c-1", None))
    assert [x.error for x in got.members] == [E.NONE] * 3
    group = ctx.consumer_group("g")
    assert group is not None and group.is_empty() and group.group_epoch == epoch + 1
    assert ctx.group("g") is None
