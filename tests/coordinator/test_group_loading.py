"""load_partition: replaying __consumer_offsets records restores groups and offsets."""
from typing import NamedTuple

from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.testing import Capture, CoordinatorContext
from kcoord.protocol.errors import ErrorCode as E


class Record(NamedTuple):  # the shape of kcoord.protocol.records.Record, which the runtime hands us
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple

S = GroupState


def _restart(ctx, **cfg):
    """A new coordinator fed every record the old one wrote, as the runtime would after a restart."""
    new = CoordinatorContext(**cfg)
    by_partition = {}
    for a in ctx.writer.appends:
        by_partition.setdefault(a.partition, []).extend(a.records)
    for p, records in by_partition.items():
        new.gc.load_partition(p, records)
    return new


def test_stable_group_and_offsets_survive_a_restart(ctx):
    leader, follower = ctx.stable_group("g", 2)
    cap = Capture()
    ctx.commit_offsets("g", leader, None, 1, [P("t", 0, 5, 2, "m"), P("t", 1, 9)], cap)
    ctx.commit_offsets("g", leader, None, 1, [P("t", 1, 10)], cap)
    new = _restart(ctx)
    g = new.groups["g"]
    assert g.is_(S.STABLE) and g.generation_id == 1 and g.leader_id == leader
    assert list(g.members) == [leader, follower] and g.protocol_name == "range"
    assert g.get(follower).assignment == follower.encode()
    assert {tp: v.offset for tp, v in new.offsets("g").items()} == {("t", 0): 5, ("t", 1): 10}
    assert new.heartbeat("g", leader, 1) == E.NONE
    assert new.sync("g", follower, 1).result.assignment == follower.encode()
    # restored members got a fresh session: the silent follower expires, causing a rebalance
    new.sleep(9000)
    assert new.heartbeat("g", leader, 1) == E.NONE
    new.sleep(1000)
    assert follower not in g.members and g.is_(S.PREPARING_REBALANCE)


def test_load_accepts_record_objects_and_tombstones(ctx):
    cap = Capture()
    ctx.commit_offsets("s", "", None, -1, [P("t", 0, 5), P("t", 1, 6)], cap)
    ctx.delete_offsets("s", [("t", 0)], cap)
    records = [Record(i, 0, k, v, tuple(h)) for i, (k, v, h) in enumerate(ctx.writer.records)]
    new = CoordinatorContext()
    new.gc.load_partition(ctx.gc.partition_for("s"), records)
    assert set(new.offsets("s")) == {("t", 1)}


def test_deleted_group_is_not_restored(ctx):
    cap = Capture()
    ctx.commit_offsets("s", "", None, -1, [P("t", 0, 5)], cap)
    ctx.delete_groups(["s"], cap)
    assert cap.calls[-1] == {"s": E.NONE}
    assert "s" not in _restart(ctx).groups


def test_empty_group_restored_empty(ctx):
    leader, = ctx.stable_group("g", 1)
    ctx.leave("g", (leader, None, None))
    g = _restart(ctx).groups["g"]
    assert g.is_(S.EMPTY) and g.generation_id == 2 and not g.members and g.protocol_type == "consumer"


def test_requests_during_load(ctx):
    """GroupCoordinatorService (Kafka 4): a shard that is loading fails the operation with
    COORDINATOR_LOAD_IN_PROGRESS, which syncGroup passes on as is (Kafka 2's REBALANCE_IN_PROGRESS for
    SyncGroup is gone) and heartbeat turns into NONE ("the group is still loading, so blindly respond")."""
    p = ctx.gc.partition_for("g")
    ctx.gc.begin_load(p)
    assert ctx.join("g").result.error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert ctx.sync("g", "m", 1).result.error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert ctx.heartbeat("g", "m", 1) == E.NONE  # Kafka answers heartbeats blindly while loading
    assert ctx.fetch_offsets("g", None).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert ctx.join("other-group-elsewhere").result.error in (E.MEMBER_ID_REQUIRED,
                                                              E.COORDINATOR_LOAD_IN_PROGRESS)
    ctx.gc.load_partition(p, [])
    assert ctx.join("g").result.error == E.MEMBER_ID_REQUIRED


def test_loaded_group_over_capacity_is_forced_to_rebalance(ctx):
    ctx.stable_group("g", 3)
    new = _restart(ctx, group_max_size=2)
    g = new.groups["g"]
    assert g.is_(S.PREPARING_REBALANCE) and g.rebalance.cause == "group_max_size"


def test_unload_makes_groups_dead_and_answers_parked_requests(ctx):
    leader, follower = ctx.stable_group("g", 2)
    parked = ctx.join("g", leader)
    n = ctx.gc.unload_partition(ctx.gc.partition_for("g"))
    assert n == 1 and parked.result.error == E.NOT_COORDINATOR
    assert ctx.heartbeat("g", follower, 1) == E.NOT_COORDINATOR
    ctx.sleep(100_000)  # stale timers of the unloaded group do nothing
    assert "g" not in ctx.groups


def test_undecodable_records_are_skipped(ctx):
    ctx.gc.load_partition(0, [(b"\x00\x01\x00", b"x"), (b"\x00\x09zz", b"y")])
    assert ctx.groups == {}


def test_static_members_restored_with_their_instance_ids(ctx):
    caps = [ctx.join("g", instance_id=f"i{k}", client_id=f"c{k}") for k in range(2)]
    ctx.sleep(6000)
    ids = [c.result.member_id for c in caps]
    leader = caps[0].result.leader_id
    for k, m in enumerate(ids):
        ctx.sync("g", m, 1, {x: b"A" for x in ids} if m == leader else {}, instance_id=f"i{k}")
    new = _restart(ctx)
    g = new.groups["g"]
    assert g.static_members == {"i0": ids[0], "i1": ids[1]}
    assert new.heartbeat("g", "old", 1, "i1") == E.FENCED_INSTANCE_ID
    r = new.join("g", instance_id="i1", client_id="c1").result  # static restart after a coordinator restart
    assert r.error == E.NONE and g.is_(S.STABLE) and g.static_members["i1"] == r.member_id


def test_shutdown_answers_parked_requests_and_refuses_new_ones(ctx):
    leader, follower = ctx.stable_group("g", 2)
    parked = ctx.join("g", leader)
    ctx.gc.shutdown()
    assert parked.result.error == E.NOT_COORDINATOR
    assert ctx.groups == {}
    assert ctx.join("g").result.error == E.COORDINATOR_NOT_AVAILABLE
    assert ctx.heartbeat("g", follower, 1) == E.COORDINATOR_NOT_AVAILABLE


def test_a_shard_moves_to_another_coordinator_and_back():
    """A shard is the unit that moves (Kafka's CoordinatorRuntime.scheduleUnloadOperation /
    scheduleLoadOperation on a leadership change): unloaded here, its log loaded there, the group and
    its offsets are served by the new owner and answered NOT_COORDINATOR by the old one."""
    a = CoordinatorContext(group_initial_rebalance_delay_ms=0)
    leader, = a.stable_group("g", 1)
    a.commit_offsets("g", leader, None, 1, [P("t", 0, 7)], Capture())
    p = a.gc.partition_for("g")
    a.gc.unload_partition(p)
    assert a.heartbeat("g", leader, 1) == E.NOT_COORDINATOR
    assert a.fetch_offsets("g", None).error == E.NOT_COORDINATOR

    b = CoordinatorContext(group_initial_rebalance_delay_ms=0)
    b.gc.owned_partitions = set()  # a node that owns nothing yet
    assert b.heartbeat("g", leader, 1) == E.NOT_COORDINATOR
    shard = b.gc.begin_load(p)
    assert b.heartbeat("g", leader, 1) == E.NONE  # loading: answered blindly
    for append in a.writer.durable():
        for key, value, _ in append.records:
            shard.replay(key, value)
    b.gc.complete_load(p)
    assert b.heartbeat("g", leader, 1) == E.NONE and b.group("g").is_(S.STABLE)
    assert {tp: v.offset for tp, v in b.offsets("g").items()} == {("t", 0): 7}
    b.commit_offsets("g", leader, None, 1, [P("t", 0, 8)], Capture())

    b.gc.unload_partition(p)  # and back: a's log plus b's writes
    a.gc.owned_partitions.add(p)
    a.gc.load_partition(p, [r for log in (a.writer, b.writer) for app in log.durable() for r in app.records])
    assert {tp: v.offset for tp, v in a.offsets("g").items()} == {("t", 0): 8}
