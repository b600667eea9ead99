"""A steady heartbeat (coordinator/consumer/steady.py) answers exactly as the full path does: same result,
no records, the session pushed forward; anything that would change the member takes the full path."""
from __future__ import annotations

import pytest

from kcoord.coordinator.consumer import heartbeat as hb_module
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


def _both(monkeypatch, send):
    """send(ctx) on two identical groups: the steady path, then the full path; (answers, records written)."""
    out = []
    for steady in (True, False):
        if not steady:
            monkeypatch.setattr(hb_module, "steady_heartbeat", lambda *_: None)
        ctx, a, b = _formed()
        before = len(ctx.writer.records)
        ctx.sleep(1000)
        answer = send(ctx, a)
        deadline = ctx.clock.timers.deadline(("consumer-session", "g", a)) - ctx.clock.now_ms()
        assert deadline == ctx.config.consumer_group_session_timeout_ms  # pushed forward
        out.append((answer._replace(member_id=None), len(ctx.writer.records) - before, deadline, ctx.events.sizes[-1][1]))
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
