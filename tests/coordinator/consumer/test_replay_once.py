"""A batch of heartbeats of one group computes each from a scratch copy replayed with the batch's records
so far (ConsumerGroupManager._run); once durable, that scratch group -- which then holds every record of
the batch -- becomes the group (manager._Replayed), instead of the shard replaying them all again. So each
record a batch writes is replayed once, and the group is what replaying the log gives."""
from __future__ import annotations

from kcoord.coordinator.consumer.consumer_group import ConsumerGroup
from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.protocol.errors import ErrorCode as E

GROUP = "g"
STATE = ("group_epoch", "assignment_epoch", "members", "static_members", "target_assignment",
         "subscription_metadata", "partition_epochs", "topic_counts", "regexes", "assignor_counts")


def _state(ctx: ConsumerGroupContext) -> dict:
    group = ctx.consumer_group(GROUP)
    return {name: getattr(group, name) for name in STATE}


def _loaded(ctx: ConsumerGroupContext) -> dict:
    fresh = ConsumerGroupContext(topics={"t": 12})
    fresh.gc.load_partition(ctx.gc.partition_for(GROUP), [(k, v) for a in ctx.writer.durable() for k, v, *_ in a.records])
    return _state(fresh)


def _counting(monkeypatch) -> list:
    calls: list = []
    replay = ConsumerGroup.replay
    monkeypatch.setattr(ConsumerGroup, "replay", lambda self, record: (calls.append(record), replay(self, record))[1])
    return calls


def _four_joins_held() -> tuple[ConsumerGroupContext, list]:
    """A group of one, then four joins with writes held: one in flight, three queued behind it."""
    ctx = ConsumerGroupContext(topics={"t": 12})
    ctx.heartbeat(GROUP, topics=["t"])
    ctx.writer.auto = False
    answers: list = []
    for _ in range(4):
        ctx.heartbeat(GROUP, topics=["t"], callback=answers.append)
    return ctx, answers


def test_a_batch_is_replayed_once_and_matches_the_log(monkeypatch):
    ctx = ConsumerGroupContext(topics={"t": 12})
    ctx.heartbeat(GROUP, topics=["t"])
    ctx.writer.auto = False
    answers: list = []
    ctx.heartbeat(GROUP, topics=["t"], callback=answers.append)  # its write in flight
    for _ in range(4):  # queued behind it: one batch
        ctx.heartbeat(GROUP, topics=["t"], callback=answers.append)
    calls = _counting(monkeypatch)
    before = len(ctx.writer.records)
    ctx.writer.complete_all()  # the second join, then the batch of four
    ctx.writer.complete_all()
    written = ctx.writer.records[before:]
    assert [a.error for a in answers] == [E.NONE] * 5 and len(ctx.consumer_group(GROUP).members) == 6
    assert len(ctx.writer.durable()) == len(ctx.writer.appends) == 3
    batch = ctx.writer.durable()[-1].records
    assert sum(k[:2] == b"\x00\x05" for k, *_ in batch) == 4  # four members' joins in one append
    assert len(calls) == len(written)  # each record replayed once
    assert _state(ctx) == _loaded(ctx)


def test_a_failed_batch_changes_nothing():
    ctx, answers = _four_joins_held()
    ctx.writer.complete_all()
    before = _state(ctx)
    ctx.writer.fail_all(E.NOT_LEADER_OR_FOLLOWER)
    assert [a.error for a in answers] == [E.NONE] + [E.NOT_COORDINATOR] * 3
    assert _state(ctx) == before == _loaded(ctx)
    assert len(ctx.consumer_group(GROUP).members) == 2


def test_a_batch_stops_at_its_byte_bound(monkeypatch):
    """Operations past MAX_BATCH_BYTES wait for the next append, first in line, in their order."""
    from kcoord.coordinator.consumer import manager
    monkeypatch.setattr(manager, "MAX_BATCH_BYTES", 1)
    ctx, answers = _four_joins_held()
    while ctx.writer.pending():
        ctx.writer.complete_all()
    assert [a.error for a in answers] == [E.NONE] * 4
    assert [a.member_epoch for a in answers] == [2, 3, 4, 5]  # one join per append, in order
    assert len(ctx.writer.durable()) == 5 and _state(ctx) == _loaded(ctx)
