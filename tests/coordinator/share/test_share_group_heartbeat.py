"""ShareGroupHeartbeat on the injected clock (Kafka 4.2's GroupMetadataManager.shareGroupHeartbeat,
shareGroupLeave, shareGroupFenceMember, throwIfShareGroupHeartbeatRequestIsInvalid): exact records,
assignments, errors, and a fresh shard replaying the log equal to the live one."""
from __future__ import annotations

from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.coordinator.partition_state import PartitionState
from kcoord.coordinator.results import RequestContext
from kcoord.coordinator.share import records as r
from kcoord.coordinator.testing import Capture
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E


def hb(ctx, gid, mid, epoch, topics=None, rack=None):
    c = Capture()
    ctx.gc.share_group_heartbeat(RequestContext("client", "/127.0.0.1", 1), m.ShareGroupHeartbeatRequest(
        group_id=gid, member_id=mid, member_epoch=epoch, rack_id=rack, subscribed_topic_names=topics), c)
    return c.result


def kinds(records):
    return [(r.decoded(x).type, r.decoded(x).member_id, x[1] is None) for x in records]


def test_join_writes_kafkas_records_and_assigns_every_partition():
    ctx = ConsumerGroupContext(topics={"t": 3})
    res = hb(ctx, "g", "m1", 0, ["t"])
    tid = ctx.topic_id("t")
    assert (res.error, res.member_id, res.member_epoch, res.heartbeat_interval_ms) == (E.NONE, "m1", 1, 5000)
    assert res.assignment == {tid: frozenset({0, 1, 2})}
    # member metadata, group epoch, target member, target epoch, current assignment
    assert kinds(ctx.writer.records) == [(r.MEMBER_METADATA, "m1", False), (r.GROUP_METADATA, None, False),
                                         (r.TARGET_MEMBER, "m1", False), (r.TARGET_METADATA, None, False),
                                         (r.CURRENT_ASSIGNMENT, "m1", False)]
    value = r.decoded(ctx.writer.records[-1]).value
    assert (value.member_epoch, value.previous_member_epoch, value.state) == (1, 0, 0)
    # a steady heartbeat writes nothing and sends no assignment
    ctx.writer.clear()
    assert hb(ctx, "g", "m1", 1).assignment is None and ctx.writer.records == []


def test_more_members_than_partitions_share_them():
    ctx = ConsumerGroupContext(topics={"t": 1})
    for i in range(3):
        hb(ctx, "g", f"m{i}", 0, ["t"])
    for i in range(3):
        assert hb(ctx, "g", f"m{i}", i + 1).member_epoch == 3  # each from the epoch it joined at
    group = ctx.shard("g").share_manager.groups["g"]
    assert (group.group_epoch, group.assignment_epoch) == (3, 3)
    assert all(mm.assigned == {ctx.topic_id("t"): frozenset({0})} and mm.member_epoch == 3
               for mm in group.members.values())


def test_second_member_spreads_partitions():
    ctx = ConsumerGroupContext(topics={"t": 4})
    hb(ctx, "g", "a", 0, ["t"])
    second = hb(ctx, "g", "b", 0, ["t"])
    tid = ctx.topic_id("t")
    assert second.member_epoch == 2 and len(second.assignment[tid]) == 2
    first = hb(ctx, "g", "a", 1)  # takes its new target at once: no revocation in a share group
    assert first.member_epoch == 2 and first.assignment[tid] | second.assignment[tid] == frozenset(range(4))


def test_leave_and_session_expiry_fence_the_member():
    ctx = ConsumerGroupContext(topics={"t": 2})
    hb(ctx, "g", "a", 0, ["t"])
    hb(ctx, "g", "b", 0, ["t"])
    ctx.writer.clear()
    left = hb(ctx, "g", "a", -1)
    assert (left.error, left.member_id, left.member_epoch) == (E.NONE, "a", -1)
    assert kinds(ctx.writer.records) == [(r.CURRENT_ASSIGNMENT, "a", True), (r.TARGET_MEMBER, "a", True),
                                         (r.MEMBER_METADATA, "a", True), (r.GROUP_METADATA, None, False)]
    ctx.writer.clear()
    ctx.sleep(45_000)  # group.share.session.timeout.ms (Kafka's default)
    assert kinds(ctx.writer.records)[-1] == (r.GROUP_METADATA, None, False)
    group = ctx.shard("g").share_manager.groups["g"]
    assert group.members == {} and group.state == "Empty" and group.group_epoch == 4


def test_errors_as_kafka():
    ctx = ConsumerGroupContext(topics={"t": 1})
    assert hb(ctx, "g", "", 0, ["t"]).error == E.INVALID_REQUEST              # MemberId can't be empty.
    assert hb(ctx, "g", "a", 0, None).error == E.INVALID_REQUEST              # SubscribedTopicNames must be set
    assert hb(ctx, "g", "a", -2).error == E.INVALID_REQUEST                   # MemberEpoch is invalid.
    assert hb(ctx, "g", "a", 0, ["t"], rack="").error == E.INVALID_REQUEST    # RackId can't be empty.
    assert hb(ctx, "g", "a", 1).error == E.GROUP_ID_NOT_FOUND                 # no such share group
    hb(ctx, "g", "a", 0, ["t"])
    assert hb(ctx, "g", "x", 1).error == E.UNKNOWN_MEMBER_ID
    assert hb(ctx, "g", "a", 5).error == E.FENCED_MEMBER_EPOCH                # greater than the member's
    hb(ctx, "g", "b", 0, ["t"]); hb(ctx, "g", "a", 1)                          # noqa: E702  a moves to epoch 2
    assert hb(ctx, "g", "a", 1).error == E.NONE                               # its previous epoch: accepted
    hb(ctx, "g", "c", 0, ["t"]); hb(ctx, "g", "a", 2)                          # noqa: E702  a moves to epoch 3
    assert hb(ctx, "g", "a", 1).error == E.FENCED_MEMBER_EPOCH                # smaller, not the previous


def test_group_type_exclusivity():
    ctx = ConsumerGroupContext(topics={"t": 1})
    ctx.heartbeat("cg", "c1", 0, topics=["t"])  # a consumer group
    res = hb(ctx, "cg", "s1", 0, ["t"])
    assert (res.error, res.message) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    hb(ctx, "sg", "s1", 0, ["t"])
    got = ctx.heartbeat("sg", "c2", 0, topics=["t"])
    assert got.error == E.GROUP_ID_NOT_FOUND
    shard = ctx.shard("sg")
    assert shard.describe_group("sg", 5).state == "Dead"
    assert [(g.group_id, g.group_type) for g in shard.list_groups(["stable"]) if g.group_id == "sg"] == [("sg", "share")]


def test_delete_empty_share_group_only():
    ctx = ConsumerGroupContext(topics={"t": 1})
    hb(ctx, "g", "a", 0, ["t"])
    out = Capture()
    ctx.gc.delete_groups(["g"], out)
    assert out.result == {"g": E.NON_EMPTY_GROUP}
    hb(ctx, "g", "a", -1)
    out = Capture()
    ctx.gc.delete_groups(["g"], out)
    assert out.result == {"g": E.NONE} and "g" not in ctx.shard("g").share_manager.groups


def test_replay_of_the_log_equals_the_live_state():
    ctx = ConsumerGroupContext(topics={"t": 3, "u": 2})
    hb(ctx, "g", "a", 0, ["t"])
    hb(ctx, "g", "b", 0, ["t", "u"])
    hb(ctx, "g", "c", 0, ["u"])
    hb(ctx, "g", "a", 1)
    hb(ctx, "g", "c", -1)
    live = ctx.shard("g").share_manager.groups
    partition = ctx.shard("g").partition
    state = PartitionState()
    state.replay([(x[0], x[1]) for a in ctx.writer.durable() for x in a.records], ctx.gc.log)
    fresh = ConsumerGroupContext(topics={"t": 3, "u": 2})
    fresh.gc.load_partition(partition, state=state)
    assert fresh.shard("g").share_manager.groups == live


def test_a_failed_write_changes_nothing_and_the_next_heartbeat_waits_for_the_write():
    """Records out, replay in (CoordinatorRuntime: a failed append is not replayed); one operation of a group at
    a time, the next computed from the durable state."""
    ctx = ConsumerGroupContext(topics={"t": 2})
    ctx.writer.auto = False
    first, second = Capture(), Capture()
    request = m.ShareGroupHeartbeatRequest
    rc = RequestContext("client", "/127.0.0.1", 1)
    ctx.gc.share_group_heartbeat(rc, request(group_id="g", member_id="a", member_epoch=0, rack_id=None,
                                             subscribed_topic_names=["t"]), first)
    ctx.gc.share_group_heartbeat(rc, request(group_id="g", member_id="b", member_epoch=0, rack_id=None,
                                             subscribed_topic_names=["t"]), second)
    assert not first.called and not second.called and len(ctx.writer.pending()) == 1  # b waits for a's write
    ctx.writer.fail_all(E.NOT_ENOUGH_REPLICAS)
    assert first.result.error == E.COORDINATOR_NOT_AVAILABLE  # map_write_error, as Kafka's append errors
    assert "g" not in ctx.shard("g").share_manager.groups
    ctx.writer.complete_all()  # b's write, computed from a group that does not exist
    assert (second.result.error, second.result.member_epoch) == (E.NONE, 1)
    assert list(ctx.shard("g").share_manager.groups["g"].members) == ["b"]


def test_a_loaded_group_gives_every_member_a_fresh_session():
    """GroupMetadataManager.onLoaded: a member that does not heartbeat after a load expires."""
    ctx = ConsumerGroupContext(topics={"t": 1})
    hb(ctx, "g", "a", 0, ["t"])
    state = PartitionState()
    state.replay([(x[0], x[1]) for a in ctx.writer.durable() for x in a.records], ctx.gc.log)
    fresh = ConsumerGroupContext(topics={"t": 1})
    fresh.gc.load_partition(ctx.shard("g").partition, state=state)
    fresh.sleep(44_999)
    assert list(fresh.shard("g").share_manager.groups["g"].members) == ["a"]
    fresh.sleep(1)
    group = fresh.shard("g").share_manager.groups["g"]
    assert group.members == {} and group.group_epoch == 2


def test_subscribed_topic_created_or_grown_bumps_the_epoch():
    """shareGroupHeartbeat: the subscribed topics' metadata changed (Kafka 4.2's metadata hash) -> group epoch
    bumped, a new target; a topic subscribed before it exists is assigned once it does."""
    ctx = ConsumerGroupContext(topics={"t": 1})
    assert hb(ctx, "g", "a", 0, ["t", "later"]).assignment == {ctx.topic_id("t"): frozenset({0})}
    assert hb(ctx, "g", "a", 1).assignment is None
    ctx.add_topic("later", 2)
    grown = hb(ctx, "g", "a", 1)
    assert grown.member_epoch == 2
    assert grown.assignment == {ctx.topic_id("t"): frozenset({0}), ctx.topic_id("later"): frozenset({0, 1})}
    ctx.add_topic("t", 3)
    assert hb(ctx, "g", "a", 2).assignment[ctx.topic_id("t")] == frozenset({0, 1, 2})
    assert hb(ctx, "g", "a", 3).assignment is None


def test_group_max_size():
    """throwIfShareGroupIsFull: a new member beyond group.share.max.size, GROUP_MAX_SIZE_REACHED; members in it
    still heartbeat."""
    ctx = ConsumerGroupContext(topics={"t": 1}, share_group_max_size=1)
    hb(ctx, "g", "a", 0, ["t"])
    full = hb(ctx, "g", "b", 0, ["t"])
    assert (full.error, full.message) == (E.GROUP_MAX_SIZE_REACHED,
                                          "The share group has reached its maximum capacity of 1 members.")
    assert hb(ctx, "g", "a", 1).error == E.NONE
