"""A classic Heartbeat from a classic member living in a consumer group while a write of that group is in flight.

Kafka 4: GroupCoordinatorService.heartbeat runs classicGroupHeartbeat as a write operation
(runtime.scheduleWriteOperation "classic-group-heartbeat"); classicGroupHeartbeatToConsumerGroup returns a
CoordinatorResult without records; and CoordinatorRuntime (coordinator-common, CoordinatorWriteEvent.run / append:
"If the records are empty, it was a read operation after all") completes such an operation at once only when no
write is pending, else only once the pending writes are committed. The operation ran against the state those
writes made. So the member hears of an epoch bump that is being written, and only once it is durable."""
from __future__ import annotations

from kcoord.coordinator.consumer.classic_members import PendingHeartbeat
from kcoord.coordinator.consumer.consumer_group import STABLE
from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.protocol.errors import ErrorCode
from tests.coordinator.consumer.test_migration import classic_group, sub

E = ErrorCode


def converged():
    """Two classic members and one consumer-protocol member, Stable, every classic heartbeat NONE."""
    ctx = ConsumerGroupContext(topics={"foo": 6}, group_initial_rebalance_delay_ms=0)
    a, b = classic_group(ctx)
    c = ctx.heartbeat("g", "", 0, topics=["foo"])
    for _ in range(4):
        for mid in (a, b):
            j = ctx.join("g", mid, protocols=[("range", sub())]).result
            ctx.sync("g", mid, j.generation_id)
        c = ctx.heartbeat("g", c.member_id, c.member_epoch, owned=c.assignment or {})
    group = ctx.consumer_group("g")
    assert group.state == STABLE
    for mid in (a, b):
        assert ctx.heartbeat_classic("g", mid, group.members[mid].member_epoch) == E.NONE
    return ctx, a, b, c


def test_a_heartbeat_waits_for_the_groups_write_and_answers_from_it():
    ctx, a, b, c = converged()
    epoch = ctx.consumer_group("g").members[a].member_epoch
    ctx.writer.auto = False
    joining = ctx.heartbeat("g", "", 0, topics=["foo"])  # a new member: the group epoch is bumped, not yet durable
    assert joining is None and ctx.writer.pending()
    pending = ctx.heartbeat_classic("g", a, epoch)
    assert isinstance(pending, PendingHeartbeat) and pending.error is None  # not answered before the write
    answers = []
    pending.then(answers.append)
    ctx.writer.complete_all()
    assert answers == [E.REBALANCE_IN_PROGRESS]  # the epoch the write made: a must rejoin


def test_no_write_in_flight_answers_at_once():
    ctx, a, b, c = converged()
    assert ctx.heartbeat_classic("g", a, ctx.consumer_group("g").members[a].member_epoch) == E.NONE
    assert ctx.heartbeat_classic("g", "nobody", 1) == E.UNKNOWN_MEMBER_ID
