"""A steady heartbeat (coordinator/consumer/steady.py) answers exactly as the full path does: same result,
no records, the session pushed forward; anything that would change the member takes the full path."""
from __future__ import annotations

import pytest

from kcoord.coordinator.consumer import heartbeat as hb_module
from kcoord.coordinator.consumer.steady import HeartbeatResult
from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.coordinator.results import RequestContext
from kcoord.coordinator.testing import Capture
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E


def _formed():
    """Three members of one group, reconciled (each acknowledging what it was given, as a client does)."""
    ctx = ConsumerGroupContext(topics={"foo": 6})
    known = {}
    for _ in range(3):
        r = ctx.heartbeat("g", "", 0, topics=["foo"])
        known[r.member_id] = (r.member_epoch, r.assignment or {})
    for _ in range(5):
        for member_id, (epoch, owned) in list(known.items()):
            r = ctx.heartbeat("g", member_id, epoch, owned=owned)
            known[member_id] = (r.member_epoch, owned if r.assignment is None else r.assignment)
    assert ctx.consumer_group("g").state == "Stable"
    a, b, _ = sorted(known)
    return ctx, a, b


def _both(monkeypatch, send, first=None):
    """send(ctx) on two identical groups: the steady path, then the full path; (answers, records written).
    `first`: what to send on the first group instead of `send` (another way into the steady path)."""
    out = []
    for steady in (True, False):
        if not steady:
            monkeypatch.setattr(hb_module, "steady_heartbeat", lambda *_: None)
        elif first is not None:
            send, then = first, send
        ctx, a, b = _formed()
        before = len(ctx.writer.records)
        ctx.sleep(1000)
        answer = send(ctx, a)
        deadline = ctx.clock.timers.deadline(("consumer-session", "g", a)) - ctx.clock.now_ms()
        assert deadline == ctx.config.consumer_group_session_timeout_ms  # pushed forward
        out.append((answer._replace(member_id=None), len(ctx.writer.records) - before, deadline, ctx.events.sizes[-1][1]))
        if steady and first is not None:
            send = then  # pyright: ignore[reportPossiblyUnbound]  (set with `first`)
    return out


@pytest.mark.parametrize("owned", [None, "all"])
def test_steady_heartbeat_answers_as_the_full_path(monkeypatch, owned):
    def send(ctx, a):
        member = ctx.consumer_group("g").members[a]
        return ctx.heartbeat("g", a, member.member_epoch,
                             owned=None if owned is None else member.assigned_partitions)
    steady, full = _both(monkeypatch, send)
    assert steady == full and steady[0].error == E.NONE and steady[0].assignment is None and steady[1] == 0


def test_a_changed_client_takes_the_full_path(monkeypatch):
    ctx, a, _ = _formed()
    member = ctx.consumer_group("g").members[a]
    calls = []
    original = hb_module.ConsumerGroupHeartbeat.update_member
    monkeypatch.setattr(hb_module.ConsumerGroupHeartbeat, "update_member",
                        lambda self, *args, **kw: (calls.append(1), original(self, *args, **kw))[1])
    got = Capture()
    ctx.gc.consumer_group_heartbeat(RequestContext("other-client", "/127.0.0.1", 1), m.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id=a, member_epoch=member.member_epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=None), got)
    assert got.result.error == E.NONE and calls == [1]
    assert ctx.consumer_group("g").members[a].client_id == "other-client"  # its member record was written


def _from_fields(ctx, a, client_id="client"):
    """The frame fast path's call: the service, from the heartbeat's fields alone; its answer as a
    HeartbeatResult (NONE, the id and epoch sent, the interval it gives, no assignment), or None."""
    epoch = ctx.consumer_group("g").members[a].member_epoch
    interval = ctx.gc.steady_consumer_heartbeat("g", a, epoch, client_id, "/127.0.0.1")
    return None if interval is None else HeartbeatResult(E.NONE, None, a, epoch, interval)


def test_steady_from_fields_answers_as_the_full_path(monkeypatch):
    """The frame fast path's answer (GroupCoordinatorService.steady_consumer_heartbeat) is the full path's:
    same result, no records, the session pushed forward, the same group size event (Kafka's
    GroupMetadataManager.consumerGroupHeartbeat on a heartbeat that changes nothing)."""
    def send(ctx, a):
        member = ctx.consumer_group("g").members[a]
        return ctx.heartbeat("g", a, member.member_epoch)
    from_fields, full = _both(monkeypatch, send, first=_from_fields)
    assert from_fields == full and from_fields[0].error == E.NONE and from_fields[1] == 0


def test_steady_from_fields_declines_what_the_full_path_must_decide():
    """None (the caller takes the full path, which answers every error) for an unknown member or group, a
    stale or future epoch, another client, a member being reconciled, or a write of the group in flight
    (answering it would overtake that write: Kafka's runtime answers a group's operations in order)."""
    ctx, a, b = _formed()
    epoch = ctx.consumer_group("g").members[a].member_epoch
    service = ctx.gc
    assert service.steady_consumer_heartbeat("g", "nobody", epoch, "client", "/127.0.0.1") is None
    assert service.steady_consumer_heartbeat("no-such-group", a, epoch, "client", "/127.0.0.1") is None
    assert service.steady_consumer_heartbeat("g", a, epoch - 1, "client", "/127.0.0.1") is None
    assert service.steady_consumer_heartbeat("g", a, epoch + 1, "client", "/127.0.0.1") is None
    assert _from_fields(ctx, a, client_id="other-client") is None
    assert _from_fields(ctx, a) is not None

    ctx.writer.auto = False
    ctx.add_topic("foo", 8)  # more partitions: the next full heartbeat bumps the group epoch and writes
    held = ctx.heartbeat("g", b, epoch)
    assert held is None and ctx.writer.pending()  # a write of the group in flight
    assert _from_fields(ctx, a) is None
    ctx.writer.complete_all()
    ctx.writer.auto = True
    assert _from_fields(ctx, a) is None  # the group's epoch moved on: a is being reconciled


def test_steady_from_fields_keeps_the_session_alive_and_only_that():
    """Steady heartbeats from the fields keep a member past many session timeouts; once they stop, its
    session expires and it is fenced (GroupMetadataManager's session timer, reset by each heartbeat)."""
    ctx, a, _ = _formed()
    members = sorted(ctx.consumer_group("g").members)
    session = ctx.config.consumer_group_session_timeout_ms
    for _ in range(4):
        ctx.sleep(session // 2)
        assert all(_from_fields(ctx, member) is not None for member in members)
    assert sorted(ctx.consumer_group("g").members) == members
    ctx.sleep(session - 1)
    assert sorted(ctx.consumer_group("g").members) == members
    ctx.sleep(2)
    assert a not in ctx.consumer_group("g").members


def test_an_unloaded_shard_answers_nothing_from_the_fields():
    """A shard that is not live (unloaded: its leadership moved) schedules no timers: the full path decides."""
    ctx, a, _ = _formed()
    ctx.shard("g").consumer_manager.live = False
    assert _from_fields(ctx, a) is None
