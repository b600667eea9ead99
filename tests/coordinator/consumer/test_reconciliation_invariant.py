"""The reconciliation invariant, over random traffic (hypothesis): no partition is ever owned by two
members at once -- neither in the coordinator's state (assigned or pending revocation) nor as the
clients see it (what their last answer gave them) -- and once every live member heartbeats, every
subscribed partition is owned and the group is Stable (Kafka's CurrentAssignmentBuilder contract:
a partition goes to its new owner only after the previous owner revoked it)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.coordinator.consumer.consumer_group import STABLE
from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.protocol.errors import ErrorCode as E

SESSION_MS = 10_000
CLIENTS = 4
TOPICS = ("foo", "bar")


class Client:
    def __init__(self, name: str, topics: list[str], assignor: str | None) -> None:
        self.name = name
        self.topics = topics
        self.assignor = assignor
        self.member_id = ""
        self.epoch = None      # None: not in the group
        self.owned: dict = {}
        self.last_ms = 0

    def forget(self) -> None:
        self.member_id, self.epoch, self.owned = "", None, {}


def heartbeat(ctx: ConsumerGroupContext, c: Client, full: bool = True) -> None:
    """Send a heartbeat; its answer updates the client when it comes (at once, or when a held write is
    released)."""
    if c.epoch is None:
        ctx.heartbeat("g", c.member_id, 0, topics=c.topics, assignor=c.assignor, rebalance_timeout_ms=60_000,
                      callback=lambda res: apply(ctx, c, res))
    else:
        ctx.heartbeat("g", c.member_id, c.epoch, owned={t: set(p) for t, p in c.owned.items()} if full else None,
                      callback=lambda res: apply(ctx, c, res))


def apply(ctx: ConsumerGroupContext, c: Client, res) -> None:
    if res.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
        c.forget()  # abandon everything and rejoin
        return
    if res.error != E.NONE:
        return  # e.g. a failed write: retry later with the same state
    c.member_id, c.epoch, c.last_ms = res.member_id, res.member_epoch, ctx.clock.now_ms()
    if res.assignment is not None:
        c.owned = {t: set(p) for t, p in res.assignment.items() if p}


def expire_sessions(ctx: ConsumerGroupContext, clients: list[Client]) -> None:
    """A client that has not heard from the coordinator for a session timeout gives its partitions up,
    as the coordinator fences it at that moment."""
    for c in clients:
        if c.epoch is not None and ctx.clock.now_ms() - c.last_ms >= SESSION_MS:
            c.forget()


def check_no_double_ownership(ctx: ConsumerGroupContext, clients: list[Client]) -> None:
    seen: dict = {}
    for c in clients:
        for t, ps in c.owned.items():
            for p in ps:
                assert (t, p) not in seen, f"{t}-{p} owned by {seen[(t, p)]} and {c.name}"
                seen[(t, p)] = c.name
    group = ctx.consumer_group("g")
    if group is None:
        return
    held: dict = {}
    for m in group.members.values():
        for a in (m.assigned_partitions, m.partitions_pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    assert (t, p) not in held, f"coordinator: {t}-{p} held by {held[(t, p)]} and {m.member_id}"
                    held[(t, p)] = m.member_id
    assert set(held) == set(group.partition_epochs)


OPS = st.one_of(
    st.tuples(st.just("hb"), st.integers(0, CLIENTS - 1), st.booleans()),
    st.tuples(st.just("leave"), st.integers(0, CLIENTS - 1), st.none()),
    st.tuples(st.just("crash"), st.integers(0, CLIENTS - 1), st.none()),
    st.tuples(st.just("sleep"), st.integers(100, 4_000), st.none()),
    st.tuples(st.just("grow"), st.sampled_from(TOPICS), st.integers(1, 3)),
    st.tuples(st.just("fail_next"), st.none(), st.none()),
    # writes held: heartbeats queue behind the first and go out as one batch (or fail together)
    st.tuples(st.just("burst"), st.lists(st.integers(0, CLIENTS - 1), min_size=2, max_size=6), st.booleans()),
)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, max_size=80),
       subscriptions=st.lists(st.sampled_from([["foo"], ["bar"], ["foo", "bar"]]), min_size=CLIENTS,
                              max_size=CLIENTS),
       assignor=st.sampled_from([None, "range"]))
def test_no_partition_owned_twice_and_all_owned_eventually(ops, subscriptions, assignor):
    ctx = ConsumerGroupContext(topics={"foo": 4, "bar": 3}, consumer_group_session_timeout_ms=SESSION_MS)
    clients = [Client(f"c{i}", subscriptions[i], assignor) for i in range(CLIENTS)]
    crashed: set[int] = set()
    for op, a, b in ops:
        if op == "hb" and a not in crashed:
            heartbeat(ctx, clients[a], full=b)
        elif op == "leave" and a not in crashed and clients[a].epoch is not None:
            if ctx.heartbeat("g", clients[a].member_id, -1).error == E.NONE:
                clients[a].forget()
        elif op == "crash":
            crashed.add(a)
            clients[a].forget()  # its process is gone: it owns nothing any more (the coordinator does not know)
        elif op == "sleep":
            ctx.sleep(a)
        elif op == "grow":
            ctx.add_topic(a, ctx.topics.topics[a][1] + b)
        elif op == "burst":
            ctx.writer.auto = False
            for i in a:
                if i not in crashed:
                    heartbeat(ctx, clients[i])
            while ctx.writer.pending():
                if b:
                    ctx.writer.complete_all()
                else:
                    ctx.writer.fail_all(E.NOT_LEADER_OR_FOLLOWER)
            ctx.writer.auto = True
        elif op == "fail_next":
            ctx.writer.auto_error = E.NOT_LEADER_OR_FOLLOWER
            live = [c for i, c in enumerate(clients) if i not in crashed]
            if live:
                heartbeat(ctx, live[0])
            ctx.writer.auto_error = E.NONE
        expire_sessions(ctx, clients)
        check_no_double_ownership(ctx, clients)
    # Settle: the dead are fenced, then every live member heartbeats until nothing changes.
    ctx.sleep(SESSION_MS + 1)
    expire_sessions(ctx, clients)
    live = [c for i, c in enumerate(clients) if i not in crashed]
    for _ in range(8):
        for c in live:
            heartbeat(ctx, c)
            check_no_double_ownership(ctx, clients)
    # Records out, replay in: the durable records alone rebuild the same group (failed writes left nothing).
    fresh = ConsumerGroupContext(topics=dict((n, p) for n, (_, p) in ctx.topics.topics.items()))
    fresh.gc.load_partition(ctx.gc.partition_for("g"), [(k, v) for a in ctx.writer.durable() for k, v, _ in a.records])
    live_group, loaded = ctx.consumer_group("g"), fresh.consumer_group("g")
    if live_group is not None:
        for attr in ("group_epoch", "assignment_epoch", "members", "target_assignment", "partition_epochs"):
            assert getattr(loaded, attr) == getattr(live_group, attr), attr
    if not live:
        return
    group = ctx.consumer_group("g")
    assert group.state == STABLE
    subscribed = {t for c in live for t in c.topics}
    wanted = {(ctx.topic_id(t), p) for t in subscribed for p in range(ctx.topics.topics[t][1])}
    owned = {(t, p) for c in live for t, ps in c.owned.items() for p in ps}
    assert owned == wanted
