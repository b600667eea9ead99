"""ConsumerGroupHeartbeat in the deterministic context: each test follows the GroupMetadataManagerTest
case of Kafka 4 it names (group-coordinator/src/test/java/org/apache/kafka/coordinator/group/)."""
from __future__ import annotations

import pytest

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.consumer_group import ASSIGNING, EMPTY, RECONCILING, STABLE
from kcoord.coordinator.consumer.member import UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS
from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.protocol.errors import ErrorCode as E


@pytest.fixture
def ctx():
    return ConsumerGroupContext(topics={"foo": 6, "bar": 3})


def parts(ctx, result, topic="foo"):
    return sorted((result.assignment or {}).get(ctx.topic_id(topic), ()))


def test_member_joins_empty_group(ctx):
    """testMemberJoinsEmptyConsumerGroup: epoch 1, every partition, and the five record types in Kafka's order."""
    a = ctx.heartbeat("g", "", 0, topics=["foo", "bar"])
    assert a.error == E.NONE and a.member_id and a.member_epoch == 1 and a.heartbeat_interval_ms == 5000
    assert parts(ctx, a) == [0, 1, 2, 3, 4, 5] and parts(ctx, a, "bar") == [0, 1, 2]
    types = [r.record_type(key) for key, _, _ in ctx.writer.records]
    assert types == [r.MEMBER_METADATA, r.PARTITION_METADATA, r.GROUP_METADATA, r.TARGET_MEMBER,
                     r.TARGET_METADATA, r.CURRENT_ASSIGNMENT]
    group = ctx.consumer_group("g")
    assert (group.state, group.group_epoch, group.assignment_epoch) == (STABLE, 1, 1)
    assert ctx.events.rebalances == [("g", "member_joined")]
    (epoch_record,) = [rec for rec in ctx.writer.records if r.record_type(rec[0]) == r.GROUP_METADATA]
    headers = dict(epoch_record[2])
    assert headers["kcoord.rebalance.cause"] == b"member_joined"
    assert headers["kcoord.rebalance.trigger_member"] == a.member_id.encode()


def test_client_generated_member_id_joins(ctx):
    """KIP-1082 (v1): an unknown member id with epoch 0 joins under that id (testMemberIdGeneration's converse)."""
    a = ctx.heartbeat("g", "client-made-id", 0, topics=["foo"])
    assert (a.error, a.member_id) == (E.NONE, "client-made-id")


def test_unknown_member_and_epoch_validation(ctx):
    """testUnknownMemberIdJoinsConsumerGroup, testConsumerGroupMemberEpochValidation."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert ctx.heartbeat("g", "nobody", 1).error == E.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat("g", a.member_id, 2).error == E.FENCED_MEMBER_EPOCH
    assert ctx.heartbeat("nogroup", "m", 1).error == E.GROUP_ID_NOT_FOUND
    ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.heartbeat("g", a.member_id, 1, owned={})  # revoked everything: epoch 2, previous epoch 1
    assert ctx.heartbeat("g", a.member_id, 0, topics=["foo"]).error == E.FENCED_MEMBER_EPOCH


def test_previous_epoch_accepted_when_owned_is_a_subset(ctx):
    """throwIfConsumerGroupMemberEpochIsInvalid: a lost response lets the member come back with the previous
    epoch if it owns no more than its assignment."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    b = ctx.heartbeat("g", "", 0, topics=["foo"])
    a2 = ctx.heartbeat("g", a.member_id, 1, owned=a.assignment)
    assert a2.member_epoch == 1 and parts(ctx, a2) == [0, 1, 2]  # revoke 3,4,5 first
    a3 = ctx.heartbeat("g", a.member_id, 1, owned=a2.assignment)
    assert a3.member_epoch == 2
    # the answer with epoch 2 was lost: epoch 1 with a subset is fine, with more is fenced
    assert ctx.heartbeat("g", a.member_id, 1, owned=a2.assignment).error == E.NONE
    assert ctx.heartbeat("g", a.member_id, 1, owned=a.assignment).error == E.FENCED_MEMBER_EPOCH
    assert b.member_epoch == 2


def test_reconciliation_moves_a_partition_only_after_revocation(ctx):
    """testReconciliationProcess: the new member gets nothing while the old owner still holds its partitions."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    b = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert b.member_epoch == 2 and parts(ctx, b) == []
    member_b = ctx.consumer_group("g").members[b.member_id]
    assert member_b.state == UNRELEASED_PARTITIONS
    # a still reports all six: it must revoke 3,4,5 and stays in epoch 1
    a2 = ctx.heartbeat("g", a.member_id, 1, owned=a.assignment)
    assert (a2.member_epoch, parts(ctx, a2)) == (1, [0, 1, 2])
    assert ctx.consumer_group("g").members[a.member_id].state == UNREVOKED_PARTITIONS
    assert ctx.heartbeat("g", b.member_id, 2).assignment is None  # still unreleased
    assert ctx.consumer_group("g").state == RECONCILING
    a3 = ctx.heartbeat("g", a.member_id, 1, owned=a2.assignment)
    assert a3.member_epoch == 2
    b2 = ctx.heartbeat("g", b.member_id, 2)
    assert parts(ctx, b2) == [3, 4, 5]
    assert ctx.consumer_group("g").state == STABLE


def test_leaving_member_bumps_group_epoch(ctx):
    """testLeavingMemberBumpsGroupEpoch: tombstones of the member's three records, then the epoch."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.writer.clear()
    left = ctx.heartbeat("g", a.member_id, -1)
    assert (left.error, left.member_id, left.member_epoch) == (E.NONE, a.member_id, -1)
    written = [(r.record_type(k), v is None) for k, v, _ in ctx.writer.records]
    assert written == [(r.CURRENT_ASSIGNMENT, True), (r.TARGET_MEMBER, True), (r.MEMBER_METADATA, True),
                       (r.PARTITION_METADATA, False), (r.GROUP_METADATA, False)]
    group = ctx.consumer_group("g")
    assert (group.state, group.group_epoch, group.partition_epochs) == (EMPTY, 2, {})
    assert ("g", "member_left") in ctx.events.rebalances


def test_static_member_temporary_leave_and_rejoin(ctx):
    """testNoGroupEpochBumpWhenStaticMemberTemporarilyLeaves, testStaticMemberGetsBackAssignmentUponRejoin,
    testShouldThrownUnreleasedInstanceIdExceptionWhenNewMemberJoinsWithInUseInstanceId."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"], instance_id="i1")
    assert ctx.heartbeat("g", "", 0, topics=["foo"], instance_id="i1").error == E.UNRELEASED_INSTANCE_ID
    gone = ctx.heartbeat("g", a.member_id, -2, instance_id="i1")
    assert (gone.error, gone.member_epoch) == (E.NONE, -2)
    assert ctx.consumer_group("g").group_epoch == 1
    back = ctx.heartbeat("g", "", 0, topics=["foo"], instance_id="i1")
    assert back.error == E.NONE and back.member_id != a.member_id
    assert parts(ctx, back) == [0, 1, 2, 3, 4, 5] and back.member_epoch == 1
    group = ctx.consumer_group("g")
    assert list(group.members) == [back.member_id] and group.group_epoch == 1
    assert ctx.heartbeat("g", a.member_id, 1, instance_id="i1").error == E.FENCED_INSTANCE_ID


def test_session_timeout_expiration(ctx):
    """testSessionTimeoutExpiration: a silent member is fenced after group.consumer.session.timeout.ms."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.sleep(40_000)
    assert ctx.heartbeat("g", a.member_id, 1).error == E.NONE  # a heartbeat pushes the deadline back
    ctx.sleep(44_000)
    assert a.member_id in ctx.consumer_group("g").members
    ctx.sleep(2_000)
    assert ctx.consumer_group("g").members == {}
    assert ("g", "session_timeout") in ctx.events.rebalances


def test_rebalance_timeout_expiration(ctx):
    """testRebalanceTimeoutExpiration: a member that does not revoke within its rebalance timeout is fenced."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"], rebalance_timeout_ms=10_000)
    b = ctx.heartbeat("g", "", 0, topics=["foo"])
    a2 = ctx.heartbeat("g", a.member_id, 1, owned=a.assignment)
    assert ctx.consumer_group("g").members[a.member_id].state == UNREVOKED_PARTITIONS
    for _ in range(3):  # both keep their sessions alive, a never revokes
        ctx.sleep(4_000)
        ctx.heartbeat("g", a.member_id, 1, owned=a.assignment)
        ctx.heartbeat("g", b.member_id, 2)
    assert a.member_id not in ctx.consumer_group("g").members
    assert ("g", "rebalance_timeout") in ctx.events.rebalances
    assert ctx.heartbeat("g", a.member_id, a2.member_epoch).error == E.UNKNOWN_MEMBER_ID
    member_b = ctx.consumer_group("g").members[b.member_id]
    assert member_b.member_epoch == 3 and ctx.consumer_group("g").state == STABLE
    assert sorted(member_b.assigned_partitions[ctx.topic_id("foo")]) == [0, 1, 2, 3, 4, 5]


def test_new_member_rejected_when_group_full():
    """testNewMemberIsRejectedWithMaximumMembersIsReached."""
    ctx = ConsumerGroupContext(topics={"foo": 2}, consumer_group_max_size=1)
    ctx.heartbeat("g", "", 0, topics=["foo"])
    assert ctx.heartbeat("g", "", 0, topics=["foo"]).error == E.GROUP_MAX_SIZE_REACHED


@pytest.mark.parametrize(("kw", "error"), [
    ({"member_epoch": 0, "topics": None}, E.INVALID_REQUEST),
    ({"member_epoch": 0, "topics": ["foo"], "rebalance_timeout_ms": -1}, E.INVALID_REQUEST),
    ({"member_epoch": 0, "topics": ["foo"], "owned": None}, E.INVALID_REQUEST),
    ({"member_epoch": 1, "member_id": ""}, E.INVALID_REQUEST),
    ({"member_epoch": -2, "member_id": "m"}, E.INVALID_REQUEST),
    ({"member_epoch": -3, "member_id": "m"}, E.INVALID_REQUEST),
    ({"member_epoch": 0, "topics": ["foo"], "instance_id": ""}, E.INVALID_REQUEST),
    ({"member_epoch": 0, "topics": ["foo"], "assignor": "sticky"}, E.UNSUPPORTED_ASSIGNOR),
    ({"member_epoch": 0, "topics": None, "regex": "foo["}, E.INVALID_REGULAR_EXPRESSION),
    ({"member_epoch": 0, "topics": None, "regex": "(?=foo)f.*"}, E.INVALID_REGULAR_EXPRESSION),  # RE2: no lookaround
    ({"member_epoch": 0, "topics": None, "regex": "(f)\\1"}, E.INVALID_REGULAR_EXPRESSION),  # nor backreferences
    ({"member_epoch": 0, "topics": None, "regex": ""}, E.INVALID_REQUEST),
])
def test_request_validation(ctx, kw, error):
    """testConsumerGroupHeartbeatRequestValidation (throwIfConsumerGroupHeartbeatRequestIsInvalid)."""
    member_id = kw.pop("member_id", "")
    assert ctx.heartbeat("g", member_id, **kw).error == error
    assert ctx.writer.records == []


def test_empty_group_id_is_invalid_request(ctx):
    assert ctx.heartbeat("", "", 0, topics=["foo"]).error == E.INVALID_REQUEST


def test_range_assignor(ctx):
    """RangeAssignor: contiguous ranges per topic, the same partition numbers across topics."""
    a = ctx.heartbeat("g", "a", 0, topics=["foo", "bar"], assignor="range")
    b = ctx.heartbeat("g", "b", 0, topics=["foo", "bar"], assignor="range")
    a2 = ctx.heartbeat("g", "a", 1, owned=a.assignment)
    assert parts(ctx, a2) == [0, 1, 2] and parts(ctx, a2, "bar") == [0, 1]
    ctx.heartbeat("g", "a", 1, owned=a2.assignment)
    b2 = ctx.heartbeat("g", "b", b.member_epoch)
    assert parts(ctx, b2) == [3, 4, 5] and parts(ctx, b2, "bar") == [2]


def test_new_partitions_bump_the_group_epoch(ctx):
    """Subscription metadata: a topic's partition count change is seen on the next heartbeat
    (hasMetadataExpired + computeSubscriptionMetadata)."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.add_topic("foo", 8)
    a2 = ctx.heartbeat("g", a.member_id, 1)
    assert a2.member_epoch == 2 and parts(ctx, a2) == list(range(8))
    assert ("g", "metadata_changed") in ctx.events.rebalances


def test_subscribing_to_a_missing_topic_then_creating_it(ctx):
    a = ctx.heartbeat("g", "", 0, topics=["later"])
    assert a.assignment == {} and ctx.consumer_group("g").state == STABLE
    ctx.add_topic("later", 2)
    assert parts(ctx, ctx.heartbeat("g", a.member_id, 1), "later") == [0, 1]


def test_failed_write_changes_nothing(ctx):
    ctx.writer.auto_error = E.NOT_LEADER_OR_FOLLOWER
    assert ctx.heartbeat("g", "", 0, topics=["foo"]).error == E.NOT_COORDINATOR
    assert ctx.consumer_group("g") is None
    ctx.writer.auto_error = E.NONE
    assert ctx.heartbeat("g", "", 0, topics=["foo"]).member_epoch == 1


def test_heartbeats_of_one_group_wait_for_the_previous_write(ctx):
    """Two joins in flight at once: the second computes from the state the first left (not from the
    same one), so the group epoch goes 1 then 2."""
    ctx.writer.auto = False
    got = []
    from kcoord.coordinator.results import RequestContext
    from kcoord.protocol import messages as m
    cls = m.ConsumerGroupHeartbeatRequest
    for mid in ("a", "b"):
        request = cls(group_id="g", member_id=mid, member_epoch=0, instance_id=None, rack_id=None,
                      rebalance_timeout_ms=1000, subscribed_topic_names=["foo"], subscribed_topic_regex=None,
                      server_assignor=None, topic_partitions=[])
        ctx.gc.consumer_group_heartbeat(RequestContext("c", "h", 1), request, got.append)
    assert len(ctx.writer.pending()) == 1
    ctx.writer.complete_all()
    assert len(ctx.writer.pending()) == 1
    ctx.writer.complete_all()
    assert [(g.member_id, g.member_epoch) for g in got] == [("a", 1), ("b", 2)]


def test_replay_rebuilds_the_same_group(ctx):
    """Records out, replay in: a fresh shard that replays every written record equals the live one."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"], instance_id="s")
    b = ctx.heartbeat("g", "", 0, topics=["foo", "bar"])
    ctx.heartbeat("g", a.member_id, 1, owned=a.assignment, instance_id="s")
    ctx.heartbeat("g", b.member_id, 2)
    live = ctx.consumer_group("g")
    fresh = ConsumerGroupContext(topics={"foo": 6, "bar": 3})
    fresh.gc.load_partition(ctx.gc.partition_for("g"), [(k, v) for k, v, _ in ctx.writer.records])
    loaded = fresh.consumer_group("g")
    for attr in ("group_epoch", "assignment_epoch", "members", "static_members", "target_assignment",
                 "subscription_metadata", "partition_epochs", "state"):
        assert getattr(loaded, attr) == getattr(live, attr), attr


def test_classic_join_to_a_consumer_group(ctx):
    """GroupMetadataManager.classicGroupJoinToClassicGroup: an empty consumer group is deleted
    (maybeDeleteEmptyConsumerGroup) and a classic group takes its id; a non-empty one takes the member in
    (classicGroupJoinToConsumerGroup: an unknown dynamic member first gets MEMBER_ID_REQUIRED)."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert ctx.join("g").result.error == E.MEMBER_ID_REQUIRED
    ctx.heartbeat("g", a.member_id, -1)
    joined = ctx.join("g").result
    assert joined.error in (E.NONE, E.MEMBER_ID_REQUIRED)
    assert ctx.consumer_group("g") is None and "g" in ctx.groups
    ctx.writer.auto_error = E.NOT_LEADER_OR_FOLLOWER  # a failed deletion answers the join with its error
    ctx.heartbeat("h", "", 0, topics=["foo"])
    ctx.writer.auto_error = E.NONE
    b = ctx.heartbeat("h", "", 0, topics=["foo"])
    ctx.heartbeat("h", b.member_id, -1)
    ctx.writer.auto_error = E.NOT_LEADER_OR_FOLLOWER
    assert ctx.join("h").result.error == E.NOT_COORDINATOR
    ctx.writer.auto_error = E.NONE
    assert ctx.consumer_group("h") is not None


def test_assigning_state_until_someone_heartbeats(ctx):
    """consumerGroupFenceMember bumps the epoch only; the next heartbeat computes the target."""
    a = ctx.heartbeat("g", "", 0, topics=["foo"])
    b = ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.heartbeat("g", b.member_id, -1)
    assert ctx.consumer_group("g").state == ASSIGNING
    a2 = ctx.heartbeat("g", a.member_id, 1, owned=a.assignment)
    assert a2.member_epoch == 3 and ctx.consumer_group("g").state == STABLE


# ---------------------------------------------------------------- regex subscriptions (v1)

def test_regex_subscription_follows_topic_creation(ctx):
    """SubscribedTopicRegex: whole-name matches (RE2/J's Pattern.matches), resolved in the background
    (GroupMetadataManager.maybeUpdateRegularExpressions / refreshRegularExpressions): the member is
    assigned nothing until the resolution is written, then the regex's topics; a topic created later
    that matches is picked up by the first refresh a heartbeat schedules after
    REGEX_BATCH_REFRESH_MIN_INTERVAL_MS, which bumps the group epoch."""
    a = ctx.heartbeat("g", "", 0, topics=None, regex="fo.*")
    assert a.error == E.NONE and a.member_epoch == 1 and a.assignment == {}
    assert ctx.consumer_group("g").members[a.member_id].subscribed_topic_regex == "fo.*"
    ctx.sleep(0)  # the resolution runs and is written
    a = ctx.heartbeat("g", a.member_id, 1)
    assert a.member_epoch == 2 and parts(ctx, a) == [0, 1, 2, 3, 4, 5] and parts(ctx, a, "bar") == []
    ctx.add_topic("food", 2)
    ctx.add_topic("xfoo", 2)  # no whole-name match
    ctx.sleep(10_001)
    a2 = ctx.heartbeat("g", a.member_id, 2)
    assert a2.member_epoch == 2  # the refresh is scheduled, not yet run
    ctx.sleep(0)
    a3 = ctx.heartbeat("g", a.member_id, 2)
    assert a3.member_epoch == 3 and parts(ctx, a3, "food") == [0, 1] and parts(ctx, a3, "xfoo") == []
    assert ctx.events.rebalances.count(("g", "regex_resolved")) == 2


def test_regex_resolutions_are_recorded_and_deleted(ctx):
    """Kafka 4 records each regex's resolution (GroupCoordinatorRecordHelpers.
    newConsumerGroupRegularExpressionRecord: topics sorted, metadata version, time) when its background
    resolution is applied (GroupMetadataManager.handleRegularExpressionsResult), and deletes it when no
    member uses the regex any more (newConsumerGroupRegularExpressionTombstone); replaying them restores
    ConsumerGroup.resolvedRegularExpressions (GroupMetadataManager.replay(ConsumerGroupRegularExpressionKey))."""
    def regex_records():
        out = [r.decode(k, v) for k, v, _ in ctx.writer.records if r.record_type(k) == r.REGULAR_EXPRESSION]
        ctx.writer.appends.clear()
        return [(x.regex, None if x.value is None else (x.value.topics, x.value.version)) for x in out]

    version = ctx.topics.metadata_version
    a = ctx.heartbeat("g", "", 0, topics=None, regex="fo.*")
    assert regex_records() == []  # not resolved on the heartbeat
    ctx.sleep(0)
    assert regex_records() == [("fo.*", (["foo"], version))]
    resolved = ctx.consumer_group("g").resolved_regexes["fo.*"]
    assert resolved.topics == {"foo"} and resolved.version == version and resolved.timestamp_ms == ctx.clock.now_ms()
    b = ctx.heartbeat("g", "", 0, topics=None, regex="fo.*")
    ctx.sleep(0)
    assert regex_records() == []  # already resolved: nothing to refresh
    ctx.add_topic("fox", 1)
    ctx.sleep(10_001)
    a = ctx.heartbeat("g", a.member_id, a.member_epoch)
    ctx.sleep(0)
    assert regex_records() == [("fo.*", (["foo", "fox"], version + 1))]
    ctx.heartbeat("g", b.member_id, -1)
    assert regex_records() == []  # a still uses it
    ctx.heartbeat("g", a.member_id, a.member_epoch, topics=["bar"], regex="")
    assert regex_records() == [("fo.*", None)]
    assert ctx.consumer_group("g").resolved_regexes == {}


def test_changing_the_regex_is_a_subscription_change(ctx):
    """A member changing its regex to one no member uses: the old one's resolution is deleted and the
    topics it matched leave the subscription metadata (the epoch is bumped: revoke them), while the new
    one waits for its resolution. The change's heartbeat schedules none (the deleted resolution was
    made less than REGEX_BATCH_REFRESH_MIN_INTERVAL_MS ago); the next one does, the group having no
    resolution left (GroupMetadataManager.maybeUpdateRegularExpressions)."""
    a = ctx.heartbeat("g", "", 0, topics=None, regex="foo")
    ctx.sleep(0)
    a = ctx.heartbeat("g", a.member_id, 1)
    assert a.member_epoch == 2 and parts(ctx, a) == [0, 1, 2, 3, 4, 5]
    a2 = ctx.heartbeat("g", a.member_id, 2, regex="bar", owned=a.assignment, topics=[])
    assert ctx.events.rebalances[-1] == ("g", "subscription_changed")
    assert parts(ctx, a2) == [] and a2.member_epoch == 2  # revoke foo first
    assert ctx.consumer_group("g").resolved_regexes == {} and not ctx.clock.timers.is_scheduled(("consumer-regex", "g"))
    a3 = ctx.heartbeat("g", a.member_id, 2, owned={})
    assert a3.member_epoch == 3 and a3.assignment is None  # (unchanged: empty) bar is not resolved yet
    ctx.sleep(0)  # the group has no resolution left to be recent: this heartbeat scheduled one
    assert ctx.events.rebalances[-1] == ("g", "regex_resolved")
    a4 = ctx.heartbeat("g", a.member_id, 3)
    assert a4.member_epoch == 4 and parts(ctx, a4, "bar") == [0, 1, 2]


def test_range_assignor_orders_static_members_first():
    """RangeAssignor.sortMemberIds: static members by instance id before dynamic ones by member id."""
    from kcoord.coordinator.consumer.assignors import AssignmentMemberSpec
    from kcoord.coordinator.consumer.assignors.range import RangeAssignor
    t = ConsumerGroupContext(topics={"foo": 3}).topic_id("foo")
    specs = {"a": AssignmentMemberSpec(None, None, frozenset({t})), "z": AssignmentMemberSpec("i2", None, frozenset({t})),
             "y": AssignmentMemberSpec("i1", None, frozenset({t}))}
    out = RangeAssignor().assign(specs, {t: 3}, {})
    assert (out["y"][t], out["z"][t], out["a"][t]) == ({0}, {1}, {2})


def test_configured_assignors_choose_the_default_and_refuse_others():
    """group.consumer.assignors: the first is the default; a ServerAssignor not listed is UNSUPPORTED_ASSIGNOR."""
    ctx = ConsumerGroupContext(topics={"foo": 3}, consumer_group_assignors=("range",))
    assert ctx.heartbeat("g", "", 0, topics=["foo"], assignor="uniform").error == E.UNSUPPORTED_ASSIGNOR
    ctx.heartbeat("g", "", 0, topics=["foo"])
    assert ctx.gc.consumer_group_describe(["g"])[0].assignor_name == "range"


def test_deleting_a_subscribed_topic_bumps_the_epoch_and_revokes(ctx):
    """A deleted topic leaves the subscription metadata: epoch bump, its partitions revoked."""
    a = ctx.heartbeat("g", "", 0, topics=["foo", "bar"])
    del ctx.topics.topics["bar"]
    ctx.topics.metadata_version += 1  # (as the broker's topic manager does on every change)
    a2 = ctx.heartbeat("g", a.member_id, 1, owned=a.assignment)
    assert ctx.consumer_group("g").group_epoch == 2 and parts(ctx, a2) == [0, 1, 2, 3, 4, 5]
    assert ctx.topic_id("foo") in a2.assignment and len(a2.assignment) == 1


def test_queued_heartbeats_go_out_as_one_batch(ctx):
    """While a group's write is in flight, its next heartbeats queue; they are then computed one after the
    other from the group as the batch leaves it and written as one append -- and fail together."""
    ctx.writer.auto = False
    got = []
    ctx.heartbeat("g", "a", 0, topics=["foo"], callback=got.append)
    for mid in ("b", "c", "d"):
        ctx.heartbeat("g", mid, 0, topics=["foo"], callback=got.append)
    ctx.writer.complete_all()  # a's join; b, c, d then go out together
    assert len(ctx.writer.pending()) == 1 and [(g.member_id, g.member_epoch) for g in got] == [("a", 1)]
    ctx.writer.complete_all()
    assert [(g.member_id, g.member_epoch) for g in got] == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    assert ctx.consumer_group("g").group_epoch == 4
    for mid in ("e", "f"):
        ctx.heartbeat("g", mid, 0, topics=["foo"], callback=got.append)
    ctx.heartbeat("g", "a", 1, callback=got.append)
    ctx.writer.fail_all(E.NOT_LEADER_OR_FOLLOWER)  # e's join fails alone ...
    ctx.writer.fail_all(E.NOT_LEADER_OR_FOLLOWER)  # ... then f's join and a's heartbeat, as one batch
    assert [g.error for g in got[4:]] == [E.NOT_COORDINATOR] * 3
    group = ctx.consumer_group("g")
    assert group.group_epoch == 4 and set(group.members) == {"a", "b", "c", "d"}
