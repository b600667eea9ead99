"""OffsetCommit / OffsetFetch validation, durability, and KIP-211 retention."""
from kcoord.coordinator.consumer_protocol import encode_subscription
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.testing import Capture, CoordinatorContext
from kcoord.protocol.consumer_offsets import OffsetCommitKey, decode_key, decode_offset_commit_value
from kcoord.protocol.errors import ErrorCode as E

S = GroupState
T0 = 1_700_000_000_000


def commit(ctx, group, parts, member="", generation=-1, instance=None, version=8, retention=-1):
    cap = Capture()
    ctx.commit_offsets(group, member, instance, generation, parts, cap, retention_time_ms=retention,
                                 request_version=version)
    return cap


def fetch(ctx, group, tps=None, require_stable=False):
    return ctx.fetch_offsets(group, tps, require_stable)


def test_simple_group_created_on_the_fly_and_offsets_fetched(ctx):
    r = commit(ctx, "simple", [P("t", 0, 42, 3, "meta"), P("t", 1, 7, -1, None)]).result
    assert r == {("t", 0): E.NONE, ("t", 1): E.NONE}
    g = ctx.groups["simple"]
    assert g.is_(S.EMPTY) and g.protocol_type is None and g.generation_id == 0
    out = fetch(ctx, "simple", [("t", 0), ("t", 1), ("t", 2)])
    assert [(p.offset, p.leader_epoch, p.metadata, p.error) for p in out.partitions] == [
        (42, 3, "meta", E.NONE), (7, -1, "", E.NONE), (-1, -1, "", E.NONE)]
    assert {(p.topic, p.partition) for p in fetch(ctx, "simple").partitions} == {("t", 0), ("t", 1)}
    key, value, _ = ctx.writer.records[0]
    assert decode_key(key) == OffsetCommitKey("simple", "t", 0)
    v = decode_offset_commit_value(value)
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (42, 3, "meta", T0)
    assert value[:2] == b"\x00\x03"


def test_retention_time_writes_value_v1_with_expire_timestamp(ctx):
    commit(ctx, "g", [P("t", 0, 1)], retention=60_000)
    _, value, _ = ctx.writer.records[0]
    assert value[:2] == b"\x00\x01"
    assert decode_offset_commit_value(value).expire_timestamp == T0 + 60_000


def test_unknown_group_with_generation(ctx):
    assert commit(ctx, "nope", [P("t", 0, 1)], "m", 3, version=9).result[("t", 0)] == E.GROUP_ID_NOT_FOUND
    assert commit(ctx, "nope", [P("t", 0, 1)], "m", 3, version=8).result[("t", 0)] == E.ILLEGAL_GENERATION
    assert "nope" not in ctx.groups


def test_member_validation_and_states(ctx):
    leader, follower = ctx.stable_group("g", 2)
    assert commit(ctx, "g", [P("t", 0, 1)], "ghost", 1).result[("t", 0)] == E.UNKNOWN_MEMBER_ID
    assert commit(ctx, "g", [P("t", 0, 1)], leader, 9).result[("t", 0)] == E.ILLEGAL_GENERATION
    assert commit(ctx, "g", [P("t", 0, 1)], "", -1).result[("t", 0)] == E.UNKNOWN_MEMBER_ID  # non-empty group
    assert commit(ctx, "g", [P("t", 0, 1)], leader, 1).result[("t", 0)] == E.NONE          # Stable
    ctx.join("g", leader)                                                                    # PreparingRebalance
    assert commit(ctx, "g", [P("t", 0, 2)], follower, 1).result[("t", 0)] == E.NONE
    ctx.join("g", follower)                                                                  # -> Completing
    assert ctx.groups["g"].is_(S.COMPLETING_REBALANCE)
    assert commit(ctx, "g", [P("t", 0, 3)], follower, 2).result[("t", 0)] == E.REBALANCE_IN_PROGRESS
    # Kafka 4 takes commits for the empty group id ("for backwards compatibility";
    # GroupCoordinatorService.commitOffsets refuses only a null one).
    assert commit(ctx, "", [P("t", 0, 3)]).result[("t", 0)] == E.NONE
    assert commit(ctx, None, [P("t", 0, 3)]).result[("t", 0)] == E.INVALID_GROUP_ID


def test_fenced_instance_and_dead_group(ctx):
    s = ctx.join("g", instance_id="i")
    ctx.sleep(3000)
    assert commit(ctx, "g", [P("t", 0, 1)], "old", 1, instance="i").result[("t", 0)] == E.FENCED_INSTANCE_ID
    ctx.groups["g"].transition_to(S.DEAD, 0)
    assert commit(ctx, "g", [P("t", 0, 1)], s.result.member_id, 1).result[("t", 0)] == E.COORDINATOR_NOT_AVAILABLE
    assert fetch(ctx, "g", [("t", 0)]).partitions[0].offset == -1


def test_metadata_too_large_rejected_per_partition():
    ctx = CoordinatorContext(offset_metadata_max_bytes=4)
    r = commit(ctx, "g", [P("t", 0, 1, -1, "12345"), P("t", 1, 1, -1, "1234")]).result
    assert r == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}
    assert len(ctx.writer.records) == 1


def test_offsets_pending_until_durable_and_require_stable(ctx):
    commit(ctx, "g", [P("t", 0, 1)])
    ctx.writer.auto = False
    cap = commit(ctx, "g", [P("t", 0, 2)])
    assert not cap.called
    assert fetch(ctx, "g", [("t", 0)]).partitions[0].offset == 1          # not applied yet
    assert fetch(ctx, "g", [("t", 0)], require_stable=True).partitions[0].error == E.UNSTABLE_OFFSET_COMMIT
    ctx.writer.complete_all()
    assert cap.result == {("t", 0): E.NONE}
    assert fetch(ctx, "g", [("t", 0)], require_stable=True).partitions[0].offset == 2


def test_failed_write_leaves_offsets_and_maps_error(ctx):
    commit(ctx, "g", [P("t", 0, 1)])
    ctx.writer.auto_error = E.MESSAGE_TOO_LARGE
    assert commit(ctx, "g", [P("t", 0, 2)]).result == {("t", 0): E.INVALID_COMMIT_OFFSET_SIZE}
    ctx.writer.auto_error = E.NOT_LEADER_OR_FOLLOWER
    assert commit(ctx, "g", [P("t", 0, 3)]).result == {("t", 0): E.NOT_COORDINATOR}
    assert fetch(ctx, "g", [("t", 0)]).partitions[0].offset == 1
    assert not ctx.pending("g")


def test_commit_refreshes_session(ctx):
    leader, = ctx.stable_group("g", 1)
    for i in range(4):
        ctx.sleep(8000)
        assert commit(ctx, "g", [P("t", 0, i)], leader, 1).result[("t", 0)] == E.NONE
    assert ctx.groups["g"].is_(S.STABLE) and leader in ctx.groups["g"].members


def _expire_records(ctx):
    return [(decode_key(k), v) for k, v, _ in ctx.writer.records]


def test_retention_simple_group_from_commit_time_then_group_deleted():
    ctx = CoordinatorContext(offsets_retention_minutes=60, offsets_retention_check_interval_ms=600_000)
    commit(ctx, "simple", [P("t", 0, 1)])
    ctx.sleep(30 * 60_000)
    commit(ctx, "simple", [P("t", 1, 1)])
    ctx.writer.clear()
    ctx.sleep(30 * 60_000)  # t-0 is 60 min old: expired at the check; t-1 is 30 min old
    from kcoord.protocol.consumer_offsets import GroupMetadataKey
    assert _expire_records(ctx) == [(OffsetCommitKey("simple", "t", 0), None)]
    ctx.writer.clear()
    ctx.sleep(30 * 60_000)
    assert _expire_records(ctx) == [(OffsetCommitKey("simple", "t", 1), None), (GroupMetadataKey("simple"), None)]
    assert "simple" not in ctx.groups


def test_retention_empty_consumer_group_counts_from_when_it_became_empty():
    ctx = CoordinatorContext(offsets_retention_minutes=60)
    leader, = ctx.stable_group("g", 1)
    commit(ctx, "g", [P("t", 0, 1)], leader, 1)
    ctx.sleep(50 * 60_000)
    # heartbeat-less: the member expired after 10 s, the group became Empty then
    g = ctx.groups["g"]
    assert g.is_(S.EMPTY)
    assert "g" in ctx.groups and ctx.offsets("g")
    ctx.sleep(20 * 60_000)  # 60 min after becoming Empty (checks run every 10 min)
    assert "g" not in ctx.groups


def test_retention_stable_group_keeps_subscribed_topics(ctx):
    ctx = CoordinatorContext(offsets_retention_minutes=10)
    sub = encode_subscription(["orders"])
    cap = ctx.join("g", instance_id="i", protocols=[("range", sub)], session_timeout_ms=120_000)
    ctx.sleep(3000)
    m = cap.result.member_id
    ctx.sync("g", m, 1, {m: b""}, instance_id="i")
    commit(ctx, "g", [P("orders", 0, 1), P("old-topic", 0, 1)], m, 1, instance="i")
    for _ in range(25):  # 25 min of heartbeats
        ctx.sleep(60_000)
        assert ctx.heartbeat("g", m, 1, "i") == E.NONE
    assert set(ctx.offsets("g")) == {("orders", 0)}


def test_explicit_expire_timestamp_wins(ctx):
    commit(ctx, "g", [P("t", 0, 1)], retention=1000)
    ctx.sleep(600_000)
    assert "g" not in ctx.groups


def test_overlapping_commits_of_one_partition_stay_pending_until_both_land(ctx):
    ctx.writer.auto = False
    first = commit(ctx, "g", [P("t", 0, 1)])
    second = commit(ctx, "g", [P("t", 0, 2)])
    assert "g" not in ctx.groups  # a simple group exists once its first offsets are durable
    assert ctx.pending("g") == {("t", 0): 2}
    a, b = ctx.writer.pending()
    a.done = True
    a.callback(E.NONE)
    assert first.result == {("t", 0): E.NONE} and ctx.pending("g") == {("t", 0): 1}
    assert fetch(ctx, "g", [("t", 0)], require_stable=True).partitions[0].error == E.UNSTABLE_OFFSET_COMMIT
    ctx.writer.complete_all()
    assert second.result == {("t", 0): E.NONE}
    assert fetch(ctx, "g", [("t", 0)], require_stable=True).partitions[0].offset == 2


def test_partly_overlapping_commits_release_only_their_own_partitions(ctx):
    ctx.writer.auto = False
    first = commit(ctx, "g", [P("t", 0, 1), P("t", 1, 1)])
    commit(ctx, "g", [P("t", 1, 2), P("t", 2, 2)])
    assert ctx.pending("g") == {("t", 0): 1, ("t", 1): 2, ("t", 2): 1}
    a, b = ctx.writer.pending()
    a.done = True
    a.callback(E.NONE)
    assert first.result == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert ctx.pending("g") == {("t", 1): 1, ("t", 2): 1}
    ctx.writer.complete_all()
    assert ctx.pending("g") == {}
    assert [p.offset for p in fetch(ctx, "g", [("t", 0), ("t", 1), ("t", 2)]).partitions] == [1, 2, 2]


def test_a_partition_named_twice_in_one_commit_keeps_the_last_entry():
    ctx = CoordinatorContext(offset_metadata_max_bytes=4)
    r = commit(ctx, "g", [P("t", 0, 1), P("t", 0, 2), P("t", 1, 1, -1, "12345"), P("t", 1, 3)]).result
    assert r == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert [p.offset for p in fetch(ctx, "g", [("t", 0), ("t", 1)]).partitions] == [2, 3]
    assert not ctx.pending("g")


def test_a_write_that_never_completes_times_out_and_a_late_answer_is_ignored(ctx):
    ctx.writer.auto = False
    cap = commit(ctx, "g", [P("t", 0, 1)])
    ctx.sleep(4999)
    assert not cap.called
    ctx.sleep(1)  # offsets.commit.timeout.ms
    assert cap.result == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert not ctx.pending("g")
    ctx.writer.complete_all()
    assert len(cap.calls) == 1 and fetch(ctx, "g", [("t", 0)]).partitions[0].offset == -1
