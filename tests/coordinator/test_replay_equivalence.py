"""Records out, replay in: after any traffic, a fresh shard that replays the partition's log from the
start holds exactly what the live shard holds of it (each group's stored GroupMetadata value and its
committed offsets), and an append that fails changes nothing.

Kafka's coordinator gets this from its runtime (CoordinatorRuntime replays the records a write
produced, and a failed write reverts to the last committed snapshot); here state changes only by
replaying records once the writer reports them durable, so the log and the live state cannot drift."""
from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.testing import Capture, CoordinatorContext
from kcoord.protocol.errors import ErrorCode as E

GROUPS = ["g1", "g2", "g3"]
CLIENTS = ["a", "b", "s"]  # "s" joins as a static member
TOPICS = ["t", "u"]


def projection(ctx: CoordinatorContext) -> dict:
    """What a group's log holds, as the live service has it: stored values and committed offsets."""
    out = {}
    for shard in ctx.gc.shards.values():
        for gid, g in shard.group_manager.groups.items():
            if g.stored is not None:
                out.setdefault(gid, {})["stored"] = g.stored
        for gid, offsets in shard.offset_manager.offsets.items():
            out.setdefault(gid, {})["offsets"] = dict(offsets)
    return out


def replayed(ctx: CoordinatorContext) -> dict:
    """A fresh service whose shards replayed, record by record, every durable append of `ctx`."""
    fresh = CoordinatorContext(ctx.config)
    by_partition: dict[int, list] = {}
    for a in ctx.writer.durable():
        by_partition.setdefault(a.partition, []).extend(a.records)
    for partition, records in by_partition.items():
        shard = fresh.gc.begin_load(partition)
        for key, value, *_ in records:
            shard.replay(key, value)
        fresh.gc.complete_load(partition)
    return projection(fresh)


class ReplayMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = CoordinatorContext(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=1,
                                      offsets_retention_check_interval_ms=20_000)
        self.members: dict[tuple[str, str], tuple[str, int]] = {}  # (group, client) -> (member id, generation)

    def _join(self, group: str, client: str):
        ctx = self.ctx
        known = self.members.get((group, client))
        instance = "i-" + client if client == "s" else None
        cap = ctx.join(group, known[0] if known else "", instance_id=instance, client_id=client)
        if cap.called and cap.result.error == E.MEMBER_ID_REQUIRED:
            cap = ctx.join(group, cap.result.member_id, client_id=client)
        return cap

    @rule(group=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS))
    def join(self, group, client):
        cap = self._join(group, client)
        self.ctx.sleep(1)  # the initial delay (0) and the join phase complete
        for c in [cap]:
            if c.called and c.result.error == E.NONE:
                self.members[(group, client)] = (c.result.member_id, c.result.generation_id)

    @rule(group=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS))
    def sync(self, group, client):
        known = self.members.get((group, client))
        if known:
            member, generation = known
            self.ctx.sync(group, member, generation, {member: b"x" + client.encode()},
                          instance_id="i-" + client if client == "s" else None)

    @rule(group=st.sampled_from(GROUPS), client=st.sampled_from(CLIENTS))
    def leave(self, group, client):
        known = self.members.pop((group, client), None)
        if known:
            self.ctx.leave(group, (known[0], "i-" + client if client == "s" else None, None))

    @rule(ms=st.sampled_from([500, 5_000, 11_000, 65_000]))
    def sleep(self, ms):
        self.ctx.sleep(ms)  # sessions, rebalance and sync timeouts, offset expiry

    @rule(group=st.sampled_from(GROUPS + ["simple"]), client=st.sampled_from(CLIENTS),
          topic=st.sampled_from(TOPICS), partition=st.integers(0, 2), offset=st.integers(0, 100))
    def commit(self, group, client, topic, partition, offset):
        member, generation = self.members.get((group, client), ("", -1))
        self.ctx.commit_offsets(group, member, "i-" + client if client == "s" and member else None, generation,
                                [P(topic, partition, offset)], Capture())

    @rule(group=st.sampled_from(GROUPS + ["simple"]), topic=st.sampled_from(TOPICS))
    def delete_offsets(self, group, topic):
        self.ctx.delete_offsets(group, [(topic, 0), (topic, 1)], Capture())

    @rule(group=st.sampled_from(GROUPS + ["simple"]))
    def delete_group(self, group):
        self.ctx.delete_groups([group], Capture())

    @rule(topic=st.sampled_from(TOPICS))
    def delete_topic(self, topic):
        self.ctx.gc.handle_topics_deleted([topic])

    @rule(op=st.sampled_from(["commit", "delete_group", "delete_offsets", "sync", "expire", "delete_topic"]),
          group=st.sampled_from(GROUPS + ["simple"]), client=st.sampled_from(CLIENTS))
    def failing_append(self, op, group, client):
        """Every append of this step fails: the log and the live state stay as they were."""
        before = projection(self.ctx)
        durable_before = len(self.ctx.writer.durable())
        self.ctx.writer.auto_error = E.KAFKA_STORAGE_ERROR
        try:
            match op:
                case "commit":
                    self.commit(group, client, "t", 0, 7)
                case "delete_group":
                    self.delete_group(group)
                case "delete_offsets":
                    self.delete_offsets(group, "t")
                case "sync":
                    self.sync(group, client)
                case "expire":
                    self.ctx.gc.cleanup_group_metadata()
                case "delete_topic":
                    self.delete_topic("u")
        finally:
            self.ctx.writer.auto_error = E.NONE
        assert len(self.ctx.writer.durable()) == durable_before
        assert projection(self.ctx) == before

    @invariant()
    def a_fresh_replay_equals_the_live_state(self):
        assert replayed(self.ctx) == projection(self.ctx)


ReplayMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])
TestReplayEquivalence = ReplayMachine.TestCase
