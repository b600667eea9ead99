"""Consumer groups and the admin and offset APIs: each test follows the Kafka 4 method it names
(group-coordinator/src/main/java/org/apache/kafka/coordinator/group/)."""
from __future__ import annotations

import pytest

from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.protocol.errors import ErrorCode as E


@pytest.fixture
def ctx():
    return ConsumerGroupContext(topics={"foo": 6, "bar": 3})



def test_offset_commit_validation(ctx):
    """ConsumerGroup.validateOffsetCommit: the member's current epoch, v9+, else STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION; epoch -1 only while the group is empty."""
    from kcoord.coordinator.results import OffsetCommit, OffsetCommitRequestPartition
    from kcoord.coordinator.testing import Capture

    def commit(member_id, epoch, version=9):
        capture = Capture()
        ctx.gc.commit_offsets(OffsetCommit("g", member_id, None, epoch,
                                           [OffsetCommitRequestPartition("foo", 0, 5, -1, None)], -1, version),
                              capture)
        return capture.result[("foo", 0)]

    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert commit(a.member_id, 1) == E.NONE
    assert commit(a.member_id, 0) == E.STALE_MEMBER_EPOCH
    assert commit("other", 1) == E.UNKNOWN_MEMBER_ID
    assert commit(a.member_id, 1, version=8) == E.UNSUPPORTED_VERSION
    assert commit("", -1) == E.UNKNOWN_MEMBER_ID
    ctx.heartbeat("g", a.member_id, -1)
    assert commit("", -1) == E.NONE
    assert ctx.offsets("g")[("foo", 0)].offset == 5
    assert "g" not in ctx.groups  # no classic group shadows the consumer group


def test_offset_fetch_validation(ctx):
    """ConsumerGroup.validateOffsetFetch (OffsetFetch v9): null member id and epoch -1 always pass;
    otherwise the member in its current epoch."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert ctx.gc.fetch_offsets("g", None).error == E.NONE
    assert ctx.gc.fetch_offsets("g", None, False, a.member_id, 1).error == E.NONE
    assert ctx.gc.fetch_offsets("g", None, False, a.member_id, 0).error == E.STALE_MEMBER_EPOCH
    assert ctx.gc.fetch_offsets("g", None, False, "other", 1).error == E.UNKNOWN_MEMBER_ID


# ---------------------------------------------------------------- the admin APIs on consumer groups

def test_list_groups_shows_consumer_groups_with_their_type_and_state(ctx):
    """ListGroups v5 (KIP-848): ConsumerGroup.asListedGroup -- protocol type and group type "consumer"."""
    ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.join("classic")
    _, listed = ctx.gc.list_groups()
    by_id = {g.group_id: g for g in listed}
    assert (by_id["g"].group_type, by_id["g"].protocol_type, by_id["g"].state) == ("consumer", "consumer", "Stable")
    assert by_id["classic"].group_type == "classic"
    assert [g.group_id for g in ctx.gc.list_groups(["stable"])[1]] == ["g"]


def test_consumer_group_describe(ctx):
    """GroupMetadataManager.consumerGroupDescribe: members with epochs, current vs target assignment;
    GROUP_ID_NOT_FOUND for unknown and classic groups; INVALID_GROUP_ID for ""."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    b = ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.join("classic")
    g, unknown, classic, empty = ctx.gc.consumer_group_describe(["g", "nope", "classic", ""])
    assert (g.state, g.group_epoch, g.assignment_epoch, g.assignor_name) == ("Reconciling", 2, 2, "uniform")
    members = {mm.member_id: mm for mm in g.members}
    foo = ctx.topic_id("foo")
    assert members[a.member_id].assignment == [(foo, "foo", [0, 1, 2, 3, 4, 5])]
    assert members[a.member_id].target_assignment == [(foo, "foo", [0, 1, 2])]
    assert (members[b.member_id].assignment, members[b.member_id].target_assignment) == ([], [(foo, "foo", [3, 4, 5])])
    assert members[b.member_id].member_epoch == 2 and members[a.member_id].member_epoch == 1
    assert unknown.error == classic.error == E.GROUP_ID_NOT_FOUND
    assert empty.error == E.INVALID_GROUP_ID


def test_describe_groups_of_a_consumer_group_is_dead(ctx):
    """GroupMetadataManager.describeGroups only describes classic groups: a consumer group is "Dead"
    (GROUP_ID_NOT_FOUND from v6, KIP-1043)."""
    ctx.heartbeat("g", "", 0, topics=["foo"])
    (old,) = ctx.gc.describe_groups(["g"], 5)
    (new,) = ctx.gc.describe_groups(["g"], 6)
    assert (old.error, old.state) == (E.NONE, "Dead") and new.error == E.GROUP_ID_NOT_FOUND


def test_delete_groups_and_offset_delete_on_consumer_groups(ctx):
    """GroupCoordinatorShard.deleteGroups (ConsumerGroup.validateDeleteGroup: Empty only; every record of the
    group tombstoned) and deleteOffsets (GROUP_SUBSCRIBED_TO_TOPIC for subscribed topics)."""
    from kcoord.coordinator.testing import Capture
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.gc.commit_offsets(__import__("kcoord.coordinator.results", fromlist=["OffsetCommit"]).OffsetCommit(
        "g", a.member_id, None, 1, [("foo", 0, 1, -1, None), ("bar", 0, 1, -1, None)], -1, 9), Capture())
    deleted = Capture()
    ctx.gc.delete_offsets("g", [("foo", 0), ("bar", 0)], deleted)
    assert deleted.result == (E.NONE, {("foo", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("bar", 0): E.NONE})
    result = Capture()
    ctx.gc.delete_groups(["g"], result)
    assert result.result == {"g": E.NON_EMPTY_GROUP}
    ctx.heartbeat("g", a.member_id, -1)
    before = len(ctx.writer.records)
    result = Capture()
    ctx.gc.delete_groups(["g"], result)
    assert result.result == {"g": E.NONE}
    assert ctx.consumer_group("g") is None and ctx.offsets("g") == {}
    assert all(v is None for _, v, _ in ctx.writer.records[before:])
    fresh = ConsumerGroupContext(topics={"foo": 6, "bar": 3})  # the whole log: the deletion survives a reload
    fresh.gc.load_partition(ctx.gc.partition_for("g"), [(k, v) for k, v, _ in ctx.writer.records])
    assert fresh.consumer_group("g") is None


def test_retention_expires_unsubscribed_offsets_then_the_empty_group(ctx):
    """OffsetMetadataManager.cleanupExpiredOffsets (ConsumerGroup: from the commit, never for subscribed
    topics) and GroupMetadataManager.maybeDeleteGroup (an Empty group without offsets is deleted)."""
    from kcoord.coordinator.results import OffsetCommit
    from kcoord.coordinator.testing import Capture
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.gc.commit_offsets(OffsetCommit("g", a.member_id, None, 1, [("foo", 0, 1, -1, None), ("bar", 0, 1, -1, None)],
                                       -1, 9), Capture())
    ctx.sleep(ctx.config.offsets_retention_ms + 1)  # the session expires on the way: the group is Empty
    ctx.gc.cleanup_group_metadata()
    assert ctx.offsets("g") == {} and ctx.consumer_group("g") is None
    b = ConsumerGroupContext(topics={"foo": 6, "bar": 3}, consumer_group_session_timeout_ms=2 * 10_080 * 60_000)
    b2 = b.heartbeat("g", "", 0, topics=["foo"])
    b.gc.commit_offsets(OffsetCommit("g", b2.member_id, None, 1, [("foo", 0, 1, -1, None), ("bar", 0, 1, -1, None)],
                                     -1, 9), Capture())
    b.sleep(b.config.offsets_retention_ms + 1)  # the member is alive, subscribed to foo only
    b.gc.cleanup_group_metadata()
    assert list(b.offsets("g")) == [("foo", 0)] and b.consumer_group("g") is not None


def test_front_door_answers(ctx):
    """GroupCoordinatorService.consumerGroupHeartbeat / consumerGroupDescribe: not active ->
    COORDINATOR_NOT_AVAILABLE; the shard loading -> COORDINATOR_LOAD_IN_PROGRESS; not owned -> NOT_COORDINATOR."""
    partition = ctx.gc.partition_for("g")
    ctx.gc.begin_load(partition)
    assert ctx.heartbeat("g", "", 0, topics=["foo"]).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert ctx.gc.consumer_group_describe(["g"])[0].error == E.COORDINATOR_LOAD_IN_PROGRESS
    ctx.gc.unload_partition(partition)
    assert ctx.heartbeat("g", "", 0, topics=["foo"]).error == E.NOT_COORDINATOR
    assert ctx.gc.consumer_group_describe(["g"])[0].error == E.NOT_COORDINATOR
    ctx.gc.shutdown()
    assert ctx.heartbeat("g", "", 0, topics=["foo"]).error == E.COORDINATOR_NOT_AVAILABLE
    assert ctx.gc.consumer_group_describe(["g"])[0].error == E.COORDINATOR_NOT_AVAILABLE


def test_unloading_a_shard_forgets_its_consumer_groups_and_timers(ctx):
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    partition = ctx.gc.partition_for("g")
    records = [(k, v) for k, v, _ in ctx.writer.records]
    ctx.gc.unload_partition(partition)
    assert not ctx.clock.timers.is_scheduled(("consumer-session", "g", a.member_id))
    ctx.gc.load_partition(partition, records)  # another coordinator takes it over: a fresh session
    assert ctx.clock.timers.is_scheduled(("consumer-session", "g", a.member_id))
    assert ctx.heartbeat("g", a.member_id, 1).error == E.NONE


def _current_assignments(ctx, member_id: str) -> list:
    """The CurrentMemberAssignment values written for `member_id`, decoded from their bytes."""
    from kcoord.coordinator.consumer import records as r

    out = []
    for key, value, *_ in ctx.writer.records:
        if key[:2] == b"\x00\x08" and value is not None:
            decoded = r.decode(key, value)
            if decoded.member_id == member_id:
                out.append(decoded.value)
    return out


def test_kip1251_commit_from_an_older_epoch_is_checked_per_partition(ctx):
    """KIP-1251 (Kafka 4.3: ConsumerGroup.validateOffsetCommit, createAssignmentEpochValidator; the tagged
    AssignmentEpochs of ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions written by
    GroupCoordinatorRecordHelpers): a partition keeps the epoch it was assigned at, and a commit from an
    epoch between that and the member's current one is accepted for it; a partition assigned later answers
    STALE_MEMBER_EPOCH alone; an epoch above the member's refuses the whole commit."""
    from kcoord.coordinator.consumer import records as r
    from kcoord.coordinator.results import OffsetCommit, OffsetCommitRequestPartition
    from kcoord.coordinator.testing import Capture

    def commit(member_id, epoch, partitions, transactional=False):
        offsets = [OffsetCommitRequestPartition(t, p, 7, -1, None) for t, p in partitions]
        capture = Capture()
        if transactional:
            ctx.gc.txn_commit_offsets(OffsetCommit("g", member_id, None, epoch, offsets, -1, 3), 5, 0, capture)
        else:
            ctx.gc.commit_offsets(OffsetCommit("g", member_id, None, epoch, offsets, -1, 9), capture)
        return capture.result

    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert a.member_epoch == 1
    foo, bar = ctx.topic_id("foo"), ctx.topic_id("bar")
    moved = ctx.heartbeat("g", a.member_id, 1, topics=["foo", "bar"], owned={foo: list(range(6))})
    assert moved.member_epoch == 2
    last = _current_assignments(ctx, a.member_id)[-1]
    assert (last.member_epoch, last.previous_member_epoch) == (2, 1)
    assert {(tp.topic_id, tuple(tp.partitions), tuple(tp.assignment_epochs)) for tp in last.assigned_partitions} == {
        (foo, (0, 1, 2, 3, 4, 5), (1, 1, 1, 1, 1, 1)), (bar, (0, 1, 2), (2, 2, 2))}
    assert r.assignment_epochs_of(last) == {foo: dict.fromkeys(range(6), 1), bar: dict.fromkeys(range(3), 2)}

    # the commit raced the heartbeat that moved the member to epoch 2: what it held at epoch 1 is accepted
    assert commit(a.member_id, 1, [("foo", 0), ("bar", 0)]) == {("foo", 0): E.NONE, ("bar", 0): E.STALE_MEMBER_EPOCH}
    assert ctx.offsets("g")[("foo", 0)].offset == 7 and ("bar", 0) not in ctx.offsets("g")
    assert commit(a.member_id, 2, [("foo", 1), ("bar", 1)]) == {("foo", 1): E.NONE, ("bar", 1): E.NONE}
    assert commit(a.member_id, 3, [("foo", 2)]) == {("foo", 2): E.STALE_MEMBER_EPOCH}  # newer than the member's
    assert commit(a.member_id, 1, [("nope", 0)]) == {("nope", 0): E.STALE_MEMBER_EPOCH}  # never assigned
    # TxnOffsetCommit: the same check, a refused partition answering ILLEGAL_GENERATION
    assert commit(a.member_id, 1, [("foo", 3), ("bar", 2)], transactional=True) == {
        ("foo", 3): E.NONE, ("bar", 2): E.ILLEGAL_GENERATION}


def test_kip1251_a_partition_given_up_and_given_back_takes_the_new_epoch(ctx):
    """CurrentAssignmentBuilder.computeNextAssignment (KIP-1251): a partition revoked and later assigned
    again counts from its new assignment, so a commit from the epoch before is refused for it."""
    from kcoord.coordinator.consumer.member import ConsumerGroupMember

    t = ctx.topic_id("foo")
    member = ConsumerGroupMember("m", member_epoch=3, assigned_partitions={t: frozenset({0, 1})})
    revoking = member.replace(member_epoch=3, assigned_partitions={t: frozenset({0})},
                              partitions_pending_revocation={t: frozenset({1})})
    assert revoking.assignment_epochs == {t: {0: 3, 1: 3}}  # revoking keeps its epoch until given up
    gone = revoking.replace(member_epoch=5, partitions_pending_revocation={})
    back = gone.replace(member_epoch=8, assigned_partitions={t: frozenset({0, 1})})
    assert (gone.assignment_epochs, back.assignment_epochs) == ({t: {0: 3}}, {t: {0: 3, 1: 8}})
    assert (back.assignment_epoch(t, 0), back.assignment_epoch(t, 1), back.assignment_epoch(t, 2)) == (3, 8, None)
