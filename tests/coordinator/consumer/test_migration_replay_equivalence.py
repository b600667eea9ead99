"""Records out, replay in, across online migrations: kafka-python-like classic members (JoinGroup / SyncGroup /
Heartbeat / LeaveGroup) and consumer-protocol members (ConsumerGroupHeartbeat) come and go in one group, so it
upgrades and downgrades (GroupMetadataManager.convertToConsumerGroup / convertToClassicGroup); after every
step a fresh shard replaying the log holds what the live one holds (the classic group's stored value, or the
consumer group's epochs, members, targets and partition owners), no partition is owned twice, and an append
that fails changes nothing."""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.coordinator.consumer_protocol import encode_subscription
from kcoord.protocol.errors import ErrorCode as E

GROUP = "g"
CLASSIC = ["a", "b", "s"]   # "s" joins with a group.instance.id
MODERN = ["x", "y", "z"]   # "z" uses the instance id of "s": static members replace each other across protocols;
#                            "y" subscribes by regex (its resolutions are records too)
TOPICS = {"foo": 6}
PROTOCOLS = [("range", encode_subscription(["foo"]))]


def projection(ctx: ConsumerGroupContext) -> dict:
    shard = ctx.shard(GROUP)
    out = {}
    classic = shard.group_manager.groups.get(GROUP)
    if classic is not None and classic.stored is not None:
        out["stored"] = classic.stored
    group = shard.consumer_manager.groups.get(GROUP)
    if group is not None:
        out["consumer"] = {name: getattr(group, name) for name in (
            "group_epoch", "assignment_epoch", "members", "static_members", "target_assignment",
            "subscription_metadata", "partition_epochs", "num_classic_members", "resolved_regexes", "topic_counts",
            "regexes", "assignor_counts")}
    return out


def replayed(ctx: ConsumerGroupContext) -> dict:
    fresh = ConsumerGroupContext(topics={name: n for name, (_id, n) in ctx.topics.topics.items()})
    fresh.gc.load_partition(ctx.gc.partition_for(GROUP), [(k, v) for a in ctx.writer.durable() for k, v, *_ in a.records])
    return projection(fresh)


class MigrationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = ConsumerGroupContext(topics=TOPICS, group_initial_rebalance_delay_ms=0)
        self.classic: dict[str, tuple[str, int]] = {}   # client -> (member id, generation)
        self.modern: dict[str, object] = {}             # client -> last HeartbeatResult

    @rule(client=st.sampled_from(CLASSIC))
    def classic_join(self, client):
        known = self.classic.get(client)
        instance = "i-s" if client == "s" else None
        cap = self.ctx.join(GROUP, known[0] if known else "", instance_id=instance, protocols=PROTOCOLS,
                            client_id=client)
        if cap.called and cap.result.error == E.MEMBER_ID_REQUIRED:
            cap = self.ctx.join(GROUP, cap.result.member_id, protocols=PROTOCOLS, client_id=client)
        self.ctx.sleep(1)
        if cap.called and cap.result.error == E.NONE:
            self.classic[client] = (cap.result.member_id, cap.result.generation_id)
        elif cap.called:  # fenced, unknown...: it rejoins from scratch next time
            self.classic.pop(client, None)

    @rule(client=st.sampled_from(CLASSIC))
    def classic_sync(self, client):
        known = self.classic.get(client)
        if known:
            member, generation = known
            self.ctx.sync(GROUP, member, generation, {m: b"" for m, _ in self.classic.values()},
                          instance_id="i-s" if client == "s" else None)

    @rule(client=st.sampled_from(CLASSIC))
    def classic_heartbeat(self, client):
        known = self.classic.get(client)
        if known:
            self.ctx.heartbeat_classic(GROUP, known[0], known[1], "i-s" if client == "s" else None)

    @rule(client=st.sampled_from(CLASSIC))
    def classic_leave(self, client):
        known = self.classic.pop(client, None)
        if known:
            self.ctx.leave_async(GROUP, (known[0], "i-s" if client == "s" else None, None))

    @rule(client=st.sampled_from(MODERN))
    def modern_heartbeat(self, client):
        last = self.modern.get(client)
        instance = "i-s" if client == "z" else None
        if last is None:
            got = (self.ctx.heartbeat(GROUP, "", 0, topics=None, regex="fo.*") if client == "y"
                   else self.ctx.heartbeat(GROUP, "", 0, topics=["foo"], instance_id=instance))
        else:
            got = self.ctx.heartbeat(GROUP, last.member_id, last.member_epoch, instance_id=instance,
                                     owned=last.assignment if last.assignment is not None else None)
        if got is not None and got.error == E.NONE:
            if got.assignment is None and last is not None:
                got = got._replace(assignment=last.assignment)
            self.modern[client] = got
        elif got is not None:
            self.modern.pop(client, None)

    @rule(client=st.sampled_from(MODERN))
    def modern_leave(self, client):
        last = self.modern.pop(client, None)
        if last is not None:
            self.ctx.heartbeat(GROUP, last.member_id, -1, instance_id="i-s" if client == "z" else None)

    @rule(partitions=st.sampled_from([1, 2]))
    def topic_matching_the_regex(self, partitions):
        self.ctx.add_topic("fox", partitions)  # created, or its partition count changed

    @rule(ms=st.sampled_from([500, 5_000, 11_000, 50_000]))
    def sleep(self, ms):
        self.ctx.sleep(ms)  # sessions (classic members' own), join and sync timeouts

    @rule(op=st.sampled_from(["modern_heartbeat", "modern_leave", "classic_join", "classic_leave"]),
          client=st.sampled_from(MODERN + CLASSIC))
    def failing_append(self, op, client):
        """Every append of this step fails: the log and the live state stay as they were."""
        if (op.startswith("modern") and client not in MODERN) or (op.startswith("classic") and client not in CLASSIC):
            return
        before, durable = projection(self.ctx), len(self.ctx.writer.durable())
        self.ctx.writer.auto_error = E.KAFKA_STORAGE_ERROR
        try:
            getattr(self, op)(client)
        finally:
            self.ctx.writer.auto_error = E.NONE
        assert len(self.ctx.writer.durable()) == durable
        assert projection(self.ctx) == before

    @invariant()
    def a_fresh_replay_equals_the_live_state(self):
        assert replayed(self.ctx) == projection(self.ctx)

    @invariant()
    def no_partition_is_owned_twice(self):
        group = self.ctx.consumer_group(GROUP)
        seen: set = set()
        for member in (group.members.values() if group is not None else ()):
            for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
                for topic_id, partitions in assignment.items():
                    for p in partitions:
                        assert (topic_id, p) not in seen
                        seen.add((topic_id, p))


MigrationMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None,
                                              suppress_health_check=[HealthCheck.too_slow])
TestMigrationReplayEquivalence = MigrationMachine.TestCase
