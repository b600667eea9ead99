"""Regex subscriptions resolved in the background, in the deterministic context (injected clock: `sleep(0)`
runs the scheduled resolution). Each test follows Kafka 4's
group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java:
consumerGroupHeartbeat -> maybeUpdateRegularExpressions (when a refresh is scheduled: a regex no
resolution covers, new topics, the refresh interval; never within REGEX_BATCH_REFRESH_MIN_INTERVAL_MS of
the last), refreshRegularExpressions (the resolution) and handleRegularExpressionsResult (its
ConsumerGroupRegularExpression records, then the subscription metadata and the group epoch bump)."""
from __future__ import annotations

import pytest

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.regex_refresh import REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.protocol.errors import ErrorCode as E

G, REGEX = "g", "regex-.*"


@pytest.fixture
def ctx():
    return ConsumerGroupContext(topics={"literal-topic": 2, "regex-a": 2, "regex-b": 1, "other": 1})


def topics_of(ctx, result) -> dict[str, list[int]]:
    """The assignment of a heartbeat's answer by topic name."""
    names = {tid: name for name, (tid, _) in ctx.topics.topics.items()}
    return {names[tid]: sorted(p) for tid, p in (result.assignment or {}).items()}


def written(ctx) -> list:
    """The records written since the last call (and forget them)."""
    out = [tuple(rec) for rec in ctx.writer.records]
    ctx.writer.clear()
    return out


def metadata(ctx, *names):
    return {name: ctx.topics.topics[name] for name in names}


def bump(epoch: int, member_id: str, cause: str, regexes=(REGEX,)) -> tuple:
    """The epoch record with its kcoord.rebalance.* headers (cause, reason, trigger member)."""
    if cause == "regex_resolved":
        reason = f"Regular expressions {list(regexes)} were resolved; the group epoch is bumped to {epoch}."
    else:
        reason = f"Member {member_id} bumped the group epoch to {epoch} ({cause})."
    return tuple(r.group_epoch_record(G, epoch, cause, reason, member_id))


def test_literal_topics_first_then_the_regex_once_its_resolution_is_written(ctx):
    """consumerGroupHeartbeat with SubscribedTopicNames and a new SubscribedTopicRegex: the names bump the
    epoch (hasMemberSubscriptionChanged) and are assigned at once; the regex is unresolved, so it adds no
    topic (ConsumerGroup.computeSubscribedTopicNames counts resolved regexes only) and a refresh is
    scheduled (maybeUpdateRegularExpressions). Running it writes the resolution, the new subscription
    metadata and epoch 2 (handleRegularExpressionsResult); the member's next heartbeat gets the regex's
    topics."""
    a = ctx.heartbeat(G, "", 0, topics=["literal-topic"], regex=REGEX)
    assert a.error == E.NONE and a.member_epoch == 1
    assert topics_of(ctx, a) == {"literal-topic": [0, 1]}
    group = ctx.consumer_group(G)
    member = group.members[a.member_id]
    lit = ctx.topic_id("literal-topic")
    assert written(ctx) == [
        tuple(r.member_subscription_record(G, member)),
        tuple(r.subscription_metadata_record(G, metadata(ctx, "literal-topic"))),
        bump(1, a.member_id, "member_joined"),
        tuple(r.target_member_record(G, a.member_id, {lit: frozenset({0, 1})})),
        tuple(r.target_epoch_record(G, 1)),
        tuple(r.current_assignment_record(G, member)),
    ]
    assert group.resolved_regexes == {} and ctx.events.rebalances == [(G, "member_joined")]

    resolved_at, version = ctx.clock.now_ms(), ctx.topics.metadata_version
    ctx.sleep(0)  # the background resolution runs, and its result is written
    assert written(ctx) == [
        r.regex_record(G, REGEX, {"regex-a", "regex-b"}, version, resolved_at),
        tuple(r.subscription_metadata_record(G, metadata(ctx, "literal-topic", "regex-a", "regex-b"))),
        bump(2, a.member_id, "regex_resolved"),
    ]
    group = ctx.consumer_group(G)
    assert group.group_epoch == 2 and group.assignment_epoch == 1
    assert group.resolved_regexes[REGEX].topics == {"regex-a", "regex-b"}
    assert ctx.events.rebalances[-1] == (G, "regex_resolved")

    a2 = ctx.heartbeat(G, a.member_id, 1)
    assert a2.member_epoch == 2
    assert topics_of(ctx, a2) == {"literal-topic": [0, 1], "regex-a": [0, 1], "regex-b": [0]}
    assert [r.record_type(k) for k, _, _ in written(ctx)] == [r.TARGET_MEMBER, r.TARGET_METADATA, r.CURRENT_ASSIGNMENT]


def test_a_member_with_only_a_regex_gets_an_empty_assignment_first(ctx):
    """A member joining a group with only a new regex: nothing to bump for (maybeUpdateRegularExpressions
    answers REGEX_UPDATED, not ..._AND_RESOLVED), so it reconciles to the current epoch with nothing; its
    topics come with the epoch the resolution bumps."""
    b = ctx.heartbeat(G, "", 0, topics=["literal-topic"])
    ctx.sleep(0)
    assert written(ctx) and b.member_epoch == 1
    a = ctx.heartbeat(G, "", 0, topics=None, regex=REGEX)
    assert (a.error, a.member_epoch, a.assignment) == (E.NONE, 1, {})
    member = ctx.consumer_group(G).members[a.member_id]
    assert written(ctx) == [tuple(r.member_subscription_record(G, member)),
                            tuple(r.current_assignment_record(G, member))]
    assert ctx.events.rebalances == [(G, "member_joined")]

    resolved_at = ctx.clock.now_ms()
    ctx.sleep(0)
    assert written(ctx) == [
        r.regex_record(G, REGEX, {"regex-a", "regex-b"}, ctx.topics.metadata_version, resolved_at),
        tuple(r.subscription_metadata_record(G, metadata(ctx, "literal-topic", "regex-a", "regex-b"))),
        bump(2, a.member_id, "regex_resolved"),
    ]
    a2 = ctx.heartbeat(G, a.member_id, 1)
    assert a2.member_epoch == 2 and topics_of(ctx, a2) == {"regex-a": [0, 1], "regex-b": [0]}
    b2 = ctx.heartbeat(G, b.member_id, 1)
    assert b2.member_epoch == 2 and b2.assignment is None  # its partitions stay as they were


def test_a_regex_already_resolved_bumps_the_epoch_at_once(ctx):
    """A second member subscribing to a regex the group has resolved: REGEX_UPDATED_AND_RESOLVED bumps the
    epoch in its own heartbeat, no refresh is scheduled, and it is assigned from the recorded resolution."""
    a = ctx.heartbeat(G, "", 0, topics=None, regex=REGEX)
    ctx.sleep(0)
    a = ctx.heartbeat(G, a.member_id, 1)
    assert a.member_epoch == 2
    written(ctx)
    b = ctx.heartbeat(G, "", 0, topics=None, regex=REGEX)
    assert b.member_epoch == 3 and ctx.events.rebalances[-1] == (G, "member_joined")
    assert r.REGULAR_EXPRESSION not in [r.record_type(k) for k, _, _ in written(ctx)]
    ctx.sleep(0)
    assert written(ctx) == []  # nothing was scheduled


def test_a_new_matching_topic_is_picked_up_by_the_next_refresh(ctx):
    """A topic created after the resolution: the next heartbeat within REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
    of the last refresh schedules nothing; the first one after it does (the resolution's version is older
    than the topics image), and the refresh records the new match and bumps the epoch."""
    a = ctx.heartbeat(G, "", 0, topics=["literal-topic"], regex=REGEX)
    ctx.sleep(0)
    a = ctx.heartbeat(G, a.member_id, a.member_epoch)
    assert a.member_epoch == 2
    ctx.add_topic("regex-c", 3)
    ctx.add_topic("xregex-d", 1)  # not a whole-name match
    written(ctx)

    ctx.sleep(REGEX_BATCH_REFRESH_MIN_INTERVAL_MS)
    a = ctx.heartbeat(G, a.member_id, a.member_epoch)
    ctx.sleep(0)
    assert written(ctx) == [] and a.assignment is None  # too soon after the last refresh

    ctx.sleep(1)
    a = ctx.heartbeat(G, a.member_id, a.member_epoch)
    resolved_at = ctx.clock.now_ms()
    ctx.sleep(0)
    assert written(ctx) == [
        r.regex_record(G, REGEX, {"regex-a", "regex-b", "regex-c"}, ctx.topics.metadata_version, resolved_at),
        tuple(r.subscription_metadata_record(G, metadata(ctx, "literal-topic", "regex-a", "regex-b", "regex-c"))),
        bump(3, a.member_id, "regex_resolved"),
    ]
    a = ctx.heartbeat(G, a.member_id, a.member_epoch)
    assert a.member_epoch == 3 and topics_of(ctx, a)["regex-c"] == [0, 1, 2] and "xregex-d" not in topics_of(ctx, a)


def test_a_periodic_refresh_that_finds_nothing_new_only_records_it():
    """group.consumer.regex.refresh.interval.ms: a resolution older than it is refreshed on a heartbeat even
    with no new topic; the same topics are recorded again (a new timestamp) and nothing is bumped."""
    ctx = ConsumerGroupContext(topics={"regex-a": 2}, consumer_group_regex_refresh_interval_ms=30_000)
    a = ctx.heartbeat(G, "", 0, topics=None, regex=REGEX)
    ctx.sleep(0)
    a = ctx.heartbeat(G, a.member_id, a.member_epoch)
    epoch = ctx.consumer_group(G).group_epoch
    for _ in range(3):
        ctx.sleep(10_000)
        a = ctx.heartbeat(G, a.member_id, a.member_epoch)
    written(ctx)
    ctx.sleep(1)
    a = ctx.heartbeat(G, a.member_id, a.member_epoch)
    resolved_at = ctx.clock.now_ms()
    ctx.sleep(0)
    assert written(ctx) == [r.regex_record(G, REGEX, {"regex-a"}, ctx.topics.metadata_version, resolved_at)]
    assert ctx.consumer_group(G).group_epoch == epoch
    assert ctx.consumer_group(G).resolved_regexes[REGEX].timestamp_ms == resolved_at


def test_a_resolution_for_a_regex_no_member_uses_any_more_writes_nothing(ctx):
    """handleRegularExpressionsResult skips a regex no member subscribes to any more (the member left
    before the result was applied)."""
    a = ctx.heartbeat(G, "", 0, topics=None, regex=REGEX)
    ctx.heartbeat(G, a.member_id, -1)
    written(ctx)
    ctx.sleep(0)
    assert written(ctx) == []
    assert ctx.consumer_group(G) is None or ctx.consumer_group(G).resolved_regexes == {}


def test_a_failed_write_of_the_resolution_changes_nothing_and_the_next_heartbeat_asks_again(ctx):
    """The resolution is applied by writing records; if the write fails, the group is as it was and a
    later heartbeat schedules another refresh (the first is no longer in flight)."""
    a = ctx.heartbeat(G, "", 0, topics=None, regex=REGEX)
    ctx.writer.auto_error = E.NOT_LEADER_OR_FOLLOWER
    ctx.sleep(0)
    assert ctx.consumer_group(G).resolved_regexes == {} and ctx.consumer_group(G).group_epoch == 1
    ctx.writer.auto_error = E.NONE
    written(ctx)
    a = ctx.heartbeat(G, a.member_id, a.member_epoch)
    ctx.sleep(0)
    assert [r.record_type(k) for k, _, _ in written(ctx)] == [r.REGULAR_EXPRESSION, r.PARTITION_METADATA,
                                                              r.GROUP_METADATA]
