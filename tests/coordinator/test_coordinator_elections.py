"""The group coordinator follows `__consumer_offsets` leadership (issue #27): GroupCoordinatorService's
on_election / complete_election / on_resignation, as Kafka 4's GroupCoordinatorService.onElection /
onResignation drive CoordinatorRuntime.scheduleLoadOperation / scheduleUnloadOperation (a load or
unload for an older epoch is ignored; GroupMetadataManager.onLoaded restarts the members' session timers).
Pure: the manual clock and the recording writer, no sockets."""
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.testing import Capture, CoordinatorContext
from kcoord.protocol.errors import ErrorCode as E

S = GroupState


def _node() -> CoordinatorContext:
    """A cluster node's service: owns no partition until elected."""
    ctx = CoordinatorContext(group_initial_rebalance_delay_ms=0)
    ctx.gc.owned_partitions = set()
    return ctx


def _elect(ctx: CoordinatorContext, partition: int, epoch: int, log: list) -> None:
    shard = ctx.gc.on_election(partition, epoch)
    assert shard is not None
    for key, value, _ in log:
        shard.replay(key, value)
    assert ctx.gc.complete_election(partition, epoch, shard)


def _log(ctx: CoordinatorContext) -> list:
    return [r for a in ctx.writer.durable() for r in a.records]


def _moved(members: int) -> tuple[CoordinatorContext, list[str]]:
    """A stable group "g" of `members` (session timeout 10 s) on the node elected at epoch 0, and the node
    elected after it at epoch 1, loaded from its log: (the new node, the members)."""
    old = _node()
    p = old.gc.partition_for("g")
    _elect(old, p, 0, [])
    ids = old.stable_group("g", members, session_timeout_ms=10_000)
    new = _node()
    _elect(new, p, 1, _log(old))
    return new, ids


def test_a_shard_loads_on_election_and_serves_its_groups_once_loaded():
    old = _node()
    p = old.gc.partition_for("g")
    _elect(old, p, 0, [])
    leader, = old.stable_group("g", 1)
    old.commit_offsets("g", leader, None, 1, [P("t", 0, 7)], Capture())

    new = _node()
    assert new.heartbeat("g", leader, 1) == E.NOT_COORDINATOR  # not elected: not the coordinator
    shard = new.gc.on_election(p, 1)
    assert shard is not None
    assert new.join("g").result.error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert new.fetch_offsets("g").error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert new.heartbeat("g", leader, 1) == E.NONE  # "still loading, so blindly respond" (Kafka)
    for key, value, _ in _log(old):
        shard.replay(key, value)
    assert new.gc.complete_election(p, 1, shard)
    assert new.group("g").is_(S.STABLE) and new.heartbeat("g", leader, 1) == E.NONE
    assert {tp: v.offset for tp, v in new.offsets("g").items()} == {("t", 0): 7}


def test_an_election_at_an_epoch_not_above_the_current_one_is_ignored():
    ctx = _node()
    p = ctx.gc.partition_for("g")
    _elect(ctx, p, 5, [])
    leader, = ctx.stable_group("g", 1)
    assert ctx.gc.on_election(p, 5) is None and ctx.gc.on_election(p, 4) is None
    assert ctx.group("g").is_(S.STABLE) and ctx.heartbeat("g", leader, 1) == E.NONE
    shard = ctx.gc.on_election(p, 6)  # a newer term: unload, then load again
    assert shard is not None and ctx.gc.epochs[p] == 6
    assert ctx.join("g").result.error == E.COORDINATOR_LOAD_IN_PROGRESS


def test_resignation_unloads_answers_parked_requests_not_coordinator_and_stops_timers():
    ctx = _node()
    p = ctx.gc.partition_for("g")
    _elect(ctx, p, 3, [])
    a, b = ctx.stable_group("g", 2, session_timeout_ms=10_000)
    rejoin = ctx.join("g", a, session_timeout_ms=10_000)  # parked: the group prepares a rebalance
    assert not rejoin.called
    assert ctx.gc.on_resignation(p, 2) == 0  # stale (older than the shard's epoch): nothing happens
    assert not rejoin.called
    assert ctx.gc.on_resignation(p, 4) == 1
    assert rejoin.result.error == E.NOT_COORDINATOR
    for request in (ctx.heartbeat("g", b, 1), ctx.join("g").result.error, ctx.fetch_offsets("g").error):
        assert request == E.NOT_COORDINATOR
    writes = len(ctx.writer.appends)
    ctx.sleep(60_000)  # no session or rebalance timer of the unloaded shard fires
    assert len(ctx.writer.appends) == writes
    assert ctx.gc.on_resignation(p, None) == 0  # nothing left


def test_a_lease_loss_resignation_without_an_epoch_always_unloads():
    ctx = _node()
    p = ctx.gc.partition_for("g")
    _elect(ctx, p, 9, [])
    leader, = ctx.stable_group("g", 1)
    assert ctx.gc.on_resignation(p, None) == 1
    assert ctx.heartbeat("g", leader, 1) == E.NOT_COORDINATOR
    assert p not in ctx.gc.epochs


def test_a_load_overtaken_by_a_resignation_or_a_newer_election_is_dropped():
    ctx = _node()
    p = ctx.gc.partition_for("g")
    first = ctx.gc.on_election(p, 1)
    assert first is not None
    ctx.gc.on_resignation(p, 2)
    assert not ctx.gc.is_loading(p, 1, first) and not ctx.gc.complete_election(p, 1, first)
    assert ctx.join("g").result.error == E.NOT_COORDINATOR
    second = ctx.gc.on_election(p, 3)
    third = ctx.gc.on_election(p, 4)
    assert second is not None and third is not None
    assert not ctx.gc.complete_election(p, 3, second)  # stale: the epoch-4 load serves, not this one
    assert ctx.join("g").result.error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert ctx.gc.complete_election(p, 4, third)
    assert ctx.join("g").result.error == E.MEMBER_ID_REQUIRED


def test_a_member_that_died_with_the_old_coordinator_expires_on_the_new_one():
    """GroupMetadataManager.onLoaded: loaded members get a fresh session timer, so one that never
    heartbeats the new coordinator is removed after its session timeout and the group rebalances."""
    new, (alive, dead) = _moved(2)
    assert set(new.group("g").members) == {alive, dead}
    for _ in range(4):  # only `alive` heartbeats the new coordinator
        new.sleep(3_000)
        new.heartbeat("g", alive, 1)
    assert dead not in new.group("g").members
    assert new.group("g").is_(S.PREPARING_REBALANCE) or new.group("g").is_(S.COMPLETING_REBALANCE)


def test_a_failed_write_changes_nothing_and_answers_as_kafka_maps_it():
    """A write that cannot reach the ISR (CoordinatorOperationExceptionHelper): NOT_ENOUGH_REPLICAS and a
    timeout answer COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR; nothing is replayed."""
    ctx = _node()
    p = ctx.gc.partition_for("g")
    _elect(ctx, p, 0, [])
    leader, = ctx.stable_group("g", 1)
    ctx.writer.auto = False
    for error, answer in ((E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
                          (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
                          (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
                          (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR)):
        cap = Capture()
        ctx.commit_offsets("g", leader, None, 1, [P("t", 0, 9)], cap)
        ctx.writer.fail_all(error)
        assert cap.result == {("t", 0): answer}
        assert ctx.offsets("g") == {}


def test_the_first_rebalance_of_a_group_loaded_by_a_new_coordinator_is_recorded_as_coordinator_moved():
    """A member whose JoinGroup the old coordinator answered NOT_COORDINATOR rejoins on the new one: that
    rebalance's cause is "coordinator_moved" (the analytics' causes); later ones have their own."""
    new, (a, b) = _moved(2)
    new.join("g", a, session_timeout_ms=10_000)  # the member comes back with its id: a rebalance
    assert new.events.rebalances[-1] == ("g", "coordinator_moved")
    assert new.join("g", b, session_timeout_ms=10_000).called  # the generation completes
    leader = new.group("g").leader_id
    assert leader is not None and new.sync("g", leader, 2, {a: b"a", b: b"b"}).result.error == E.NONE
    moved = len(new.events.rebalances)
    new.join_new_member("g", session_timeout_ms=10_000)  # a new member later: its own cause
    assert new.events.rebalances[moved:] == [("g", "member_joined")]


def test_a_restart_load_records_no_move():
    """Single-node mode loads every shard at start (load_partition): no coordinator moved."""
    old = CoordinatorContext(group_initial_rebalance_delay_ms=0)
    a, = old.stable_group("g", 1, session_timeout_ms=10_000)
    new = CoordinatorContext(group_initial_rebalance_delay_ms=0)
    new.gc.owned_partitions = set()
    new.gc.load_partition(new.gc.partition_for("g"), _log(old))
    new.join("g", a, session_timeout_ms=10_000, protocols=[("range", b"other")])
    assert new.events.rebalances[-1][1] != "coordinator_moved"


def test_a_consumer_group_member_that_died_with_the_old_coordinator_is_fenced_by_the_new_one():
    """KIP-848 (GroupMetadataManager.onLoaded): members loaded from their records get a fresh session timer
    on the elected coordinator; the one that never heartbeats it is fenced, the other stays."""
    from kcoord.coordinator.consumer.testing import ConsumerGroupContext

    old = ConsumerGroupContext(topics={"foo": 6})
    p = old.gc.partition_for("g")
    alive = old.heartbeat("g", "", 0, topics=["foo"])
    dead = old.heartbeat("g", "", 0, topics=["foo"])
    old.heartbeat("g", alive.member_id, alive.member_epoch)

    new = ConsumerGroupContext(topics={"foo": 6})
    new.gc.owned_partitions = set()
    shard = new.gc.on_election(p, 7)
    assert shard is not None
    for key, value, _ in old.writer.records:
        shard.replay(key, value)
    assert new.gc.complete_election(p, 7, shard)
    assert set(new.consumer_group("g").members) == {alive.member_id, dead.member_id}
    epoch = new.consumer_group("g").members[alive.member_id].member_epoch
    for _ in range(10):  # 50 s: past the 45 s session, `alive` heartbeating every 5 s
        new.sleep(5_000)
        result = new.heartbeat("g", alive.member_id, epoch)
        assert result.error == E.NONE
        epoch = result.member_epoch
    assert set(new.consumer_group("g").members) == {alive.member_id}
    assert ("g", "session_timeout") in new.events.rebalances
