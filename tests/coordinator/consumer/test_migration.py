"""Online migration between classic and consumer groups (KIP-848), as Kafka 4's GroupMetadataManager does it:
the upgrade when a ConsumerGroupHeartbeat joins a classic group, classic members served inside a consumer
group, and the downgrade when the last consumer-protocol member goes. Each test names the Kafka source it
follows (group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java
unless said otherwise)."""
from __future__ import annotations

import dataclasses

import pytest

from kcoord.coordinator.consumer import records as cr
from kcoord.coordinator.consumer.consumer_group import STABLE
from kcoord.coordinator.consumer.migration import assignment_from_bytes
from kcoord.coordinator.consumer.testing import ConsumerGroupContext
from kcoord.coordinator.consumer_protocol import encode_subscription
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.testing import Capture
from kcoord.protocol import messages as m
from kcoord.protocol.consumer_offsets import (
    decode_key,
    encode_group_metadata_key,
    encode_group_metadata_value,
)
from kcoord.protocol.errors import ErrorCode

E = ErrorCode


def sub(topics=("foo",)) -> bytes:
    return encode_subscription(list(topics))


def assign(partitions, topic="foo") -> bytes:
    tp = m.ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=list(partitions))
    return m.encode_versioned("ConsumerProtocolAssignment",
                              m.ConsumerProtocolAssignment(assigned_partitions=[tp], user_data=None), 0)


def partitions_of(data: bytes) -> list[int]:
    value = m.decode_versioned("ConsumerProtocolAssignment", data)[0]
    return sorted(p for tp in value.assigned_partitions for p in tp.partitions)


@pytest.fixture
def ctx():
    return ConsumerGroupContext(topics={"foo": 6}, group_initial_rebalance_delay_ms=0)


def classic_group(ctx, n=2, protocol_type="consumer", group_id="g"):
    """A Stable classic group of `n` members splitting foo's 6 partitions; member ids, leader first."""
    kw = dict(protocols=[("range", sub())], protocol_type=protocol_type)
    caps = [ctx.join_new_member(group_id, client_id=f"c{i}", **kw) for i in range(n)]
    ctx.sleep(1)
    results = [c.result for c in caps]
    ids = [r.member_id for r in results]
    leader, gen = results[0].leader_id, results[0].generation_id
    share = {mid: assign(range(i, 6, n)) for i, mid in enumerate(ids)}
    ctx.sync(group_id, leader, gen, share)
    for mid in ids:
        if mid != leader:
            ctx.sync(group_id, mid, gen)
    assert ctx.group(group_id).is_(GroupState.STABLE)
    return [leader] + [mid for mid in ids if mid != leader]


def assert_owned_once(group):
    seen = {}
    for member in group.members.values():
        for a in (member.assigned_partitions, member.partitions_pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {member.member_id}"
                    seen[(t, p)] = member.member_id


def record_kinds(records):
    out = []
    for key, value, *_ in records:
        rtype = cr.record_type(key)
        out.append(("classic" if rtype is None else rtype, value is None))
    return out


def test_upgrade_converts_the_classic_group(ctx):
    """consumerGroupHeartbeat -> getOrMaybeCreateConsumerGroup -> validateOnlineUpgrade / convertToConsumerGroup
    (ClassicGroup.createGroupTombstoneRecords, then ConsumerGroup.fromClassicGroup + createConsumerGroupRecords):
    the classic group's tombstone, then each member's subscription, the epoch (the generation), targets, the
    target epoch and current assignments; the joining member then bumps the epoch (recorded as "migration")."""
    a, b = classic_group(ctx)
    gen = ctx.group("g").generation_id
    before = len(ctx.writer.records)
    c = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert c.error == E.NONE and c.member_epoch == gen + 1
    written = ctx.writer.records[before:]
    kinds = record_kinds(written)
    assert kinds[:8] == [("classic", True), (cr.MEMBER_METADATA, False), (cr.MEMBER_METADATA, False),
                         (cr.GROUP_METADATA, False), (cr.TARGET_MEMBER, False), (cr.TARGET_MEMBER, False),
                         (cr.TARGET_METADATA, False), (cr.CURRENT_ASSIGNMENT, False)]
    assert kinds[8] == (cr.CURRENT_ASSIGNMENT, False)
    assert isinstance(decode_key(written[0][0]).group, str)
    group = ctx.consumer_group("g")
    assert ctx.group("g") is None and group is not None
    assert group.group_epoch == gen + 1 and group.num_classic_members == 2
    classic_a = group.members[a]
    assert classic_a.classic.session_timeout_ms == 10_000 and classic_a.classic.supported_protocols == (("range", sub()),)
    assert classic_a.member_epoch == gen and sorted(classic_a.assigned_partitions[ctx.topic_id("foo")]) == [0, 2, 4]
    assert ("g", "migration") in ctx.events.rebalances
    bumps = [dict(h) for k, _v, h in written if cr.record_type(k) == cr.GROUP_METADATA and h]
    assert [b["kcoord.rebalance.cause"] for b in bumps] == [b"migration"]  # the createConsumerGroupRecords one has none
    assert_owned_once(group)


def test_classic_members_rejoin_the_consumer_group(ctx):
    """classicGroupHeartbeatToConsumerGroup (REBALANCE_IN_PROGRESS while the member must rejoin),
    classicGroupJoinToConsumerGroup (generation = member epoch, protocol type "consumer"),
    classicGroupSyncToConsumerGroup (prepareAssignment: assigned partitions in the member's protocol version)."""
    a, b = classic_group(ctx)
    gen = ctx.group("g").generation_id
    c = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert ctx.heartbeat_classic("g", a, gen) == E.REBALANCE_IN_PROGRESS
    assert ctx.heartbeat_classic("g", a, gen + 7) == E.ILLEGAL_GENERATION
    assert ctx.heartbeat_classic("g", "nobody", gen) == E.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat_classic("g", c.member_id, c.member_epoch) == E.UNKNOWN_MEMBER_ID  # not classic
    for _ in range(4):  # everyone converges: classic members rejoin + sync, the consumer member heartbeats
        for mid in (a, b):
            j = ctx.join("g", mid, protocols=[("range", sub())]).result
            assert j.error == E.NONE and j.protocol_type == "consumer" and j.protocol_name == "range"
            s = ctx.sync("g", mid, j.generation_id, protocol_type="consumer", protocol_name="range").result
            assert s.error in (E.NONE, E.REBALANCE_IN_PROGRESS)
        c = ctx.heartbeat("g", c.member_id, c.member_epoch, owned=c.assignment or {})
        assert_owned_once(ctx.consumer_group("g"))
    group = ctx.consumer_group("g")
    assert group.state == STABLE
    got = {}
    for mid in (a, b):
        member = group.members[mid]
        s = ctx.sync("g", mid, member.member_epoch).result
        assert s.error == E.NONE
        got[mid] = partitions_of(s.assignment)
        assert ctx.heartbeat_classic("g", mid, member.member_epoch) == E.NONE
    got[c.member_id] = sorted(group.members[c.member_id].assigned_partitions[ctx.topic_id("foo")])
    assert sorted(p for ps in got.values() for p in ps) == list(range(6)) and all(got.values())


def test_downgrade_when_the_last_consumer_member_leaves(ctx):
    """consumerGroupLeave -> consumerGroupFenceMember -> validateOnlineDowngradeWithFencedMember /
    convertToClassicGroup (ConsumerGroup.createGroupTombstoneRecords, ClassicGroup.fromConsumerGroup +
    createClassicGroupRecords): the consumer group's tombstones in Kafka's order, then a GroupMetadata record of a
    Stable classic group at the group epoch; it then rebalances ("migration") and the members rejoin."""
    a, b = classic_group(ctx)
    c = ctx.heartbeat("g", "", 0, topics=["foo"])
    epoch = ctx.consumer_group("g").group_epoch
    before = len(ctx.writer.records)
    left = ctx.heartbeat("g", c.member_id, -1)
    assert left.error == E.NONE and left.member_epoch == -1
    kinds = record_kinds(ctx.writer.records[before:])
    n = 3
    assert kinds == ([(cr.CURRENT_ASSIGNMENT, True)] * n + [(cr.TARGET_MEMBER, True)] * n + [(cr.TARGET_METADATA, True)]
                     + [(cr.MEMBER_METADATA, True)] * n + [(cr.PARTITION_METADATA, True), (cr.GROUP_METADATA, True),
                                                           ("classic", False)])
    assert ctx.consumer_group("g") is None
    classic = ctx.group("g")
    assert classic.stored.generation == epoch and classic.stored.protocol_type == "consumer"
    assert sorted(mm.member_id for mm in classic.stored.members) == sorted([a, b])
    assert classic.is_(GroupState.PREPARING_REBALANCE)
    assert ctx.events.rebalances.count(("g", "migration")) == 2
    assert ctx.heartbeat_classic("g", a, epoch) == E.REBALANCE_IN_PROGRESS
    ja, jb = ctx.join("g", a, protocols=[("range", sub())]), ctx.join("g", b, protocols=[("range", sub())])
    assert ja.result.error == E.NONE and jb.result.error == E.NONE and ja.result.generation_id == epoch + 1


def test_upgrade_refused_by_policy_or_size(ctx):
    """validateOnlineUpgrade: online upgrade disabled, a classic group not using the consumer embedded protocol,
    or more members than group.consumer.max.size: GROUP_ID_NOT_FOUND with Kafka's message."""
    for policy in ("disabled", "downgrade"):
        c = ConsumerGroupContext(topics={"foo": 6}, group_initial_rebalance_delay_ms=0,
                                 consumer_group_migration_policy=policy)
        classic_group(c)
        got = c.heartbeat("g", "", 0, topics=["foo"])
        assert got.error == E.GROUP_ID_NOT_FOUND
        assert got.message == "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
        assert c.group("g").is_(GroupState.STABLE) and c.consumer_group("g") is None
    c = ConsumerGroupContext(topics={"foo": 6}, group_initial_rebalance_delay_ms=0, consumer_group_max_size=1)
    classic_group(c)
    got = c.heartbeat("g", "", 0, topics=["foo"])
    assert got.error == E.GROUP_ID_NOT_FOUND and "exceeds the consumer group maximum size" in got.message
    classic_group(ctx, protocol_type="connect")
    got = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert got.error == E.GROUP_ID_NOT_FOUND and "does not use the consumer embedded protocol" in got.message


def test_no_downgrade_when_policy_or_size_forbids(ctx):
    """validateOnlineDowngradeWithFencedMember: downgrade disabled (policy "upgrade"), or more remaining members
    than group.max.size: the member is just removed and the group stays a consumer group of classic members."""
    for shrink in (dict(consumer_group_migration_policy="upgrade"), dict(group_max_size=1)):
        c = ConsumerGroupContext(topics={"foo": 6}, group_initial_rebalance_delay_ms=0)
        classic_group(c)
        consumer = c.shard("g").consumer_manager
        consumer.config = dataclasses.replace(consumer.config, **shrink)
        x = c.heartbeat("g", "", 0, topics=["foo"])
        assert x.error == E.NONE
        c.heartbeat("g", x.member_id, -1)
        group = c.consumer_group("g")
        assert group is not None and c.group("g") is None
        assert x.member_id not in group.members and group.num_classic_members == len(group.members) == 2


def test_classic_join_errors(ctx):
    """classicGroupJoinToConsumerGroup: throwIfClassicProtocolIsNotSupported (INCONSISTENT_GROUP_PROTOCOL for a
    protocol type other than "consumer" or protocols no classic member supports), MEMBER_ID_REQUIRED for an
    unknown dynamic member (v4+), throwIfConsumerGroupIsFull (GROUP_MAX_SIZE_REACHED)."""
    classic_group(ctx)
    ctx.heartbeat("g", "", 0, topics=["foo"])
    assert ctx.join("g", protocol_type="connect", protocols=[("range", sub())]).result.error == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.join("g", protocols=[("roundrobin", sub())]).result.error == E.INCONSISTENT_GROUP_PROTOCOL
    first = ctx.join("g", protocols=[("range", sub()), ("roundrobin", sub())]).result
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id
    full = ConsumerGroupContext(topics={"foo": 6}, group_initial_rebalance_delay_ms=0, consumer_group_max_size=3)
    classic_group(full)
    full.heartbeat("g", "", 0, topics=["foo"])
    assert full.join("g", "new-one", protocols=[("range", sub())]).result.error == E.GROUP_MAX_SIZE_REACHED


def test_classic_sync_and_leave_errors(ctx):
    """classicGroupSyncToConsumerGroup: ILLEGAL_GENERATION (throwIfGenerationIdUnmatched), INCONSISTENT_GROUP_PROTOCOL
    (throwIfClassicProtocolUnmatched), REBALANCE_IN_PROGRESS (throwIfRebalanceInProgress), UNKNOWN_MEMBER_ID for a
    consumer-protocol member (throwIfMemberDoesNotUseClassicProtocol); classicGroupLeaveToConsumerGroup removes the
    member and bumps the epoch."""
    a, b = classic_group(ctx)
    gen = ctx.group("g").generation_id
    c = ctx.heartbeat("g", "", 0, topics=["foo"])
    assert ctx.sync("g", a, gen + 5).result.error == E.ILLEGAL_GENERATION
    assert ctx.sync("g", a, gen, protocol_type="connect").result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.sync("g", a, gen, protocol_name="roundrobin").result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert ctx.sync("g", a, gen).result.error == E.REBALANCE_IN_PROGRESS
    assert ctx.sync("g", c.member_id, c.member_epoch).result.error == E.UNKNOWN_MEMBER_ID
    epoch = ctx.consumer_group("g").group_epoch
    got = ctx.leave_async("g", (a, None, "bye"), ("ghost", None, None))
    assert got.error == E.NONE and [(x.member_id, x.error) for x in got.members] == [(a, E.NONE),
                                                                                     ("ghost", E.UNKNOWN_MEMBER_ID)]
    group = ctx.consumer_group("g")
    assert a not in group.members and group.group_epoch == epoch + 1


def test_classic_member_session_expires_in_the_consumer_group(ctx):
    """scheduleConsumerGroupSessionTimeout with the classic member's own session timeout (convertToConsumerGroup);
    its expiry fences it (consumerGroupFenceMember)."""
    a, b = classic_group(ctx)
    c = ctx.heartbeat("g", "", 0, topics=["foo"])
    for _ in range(4):
        ctx.sleep(3000)
        c = ctx.heartbeat("g", c.member_id, c.member_epoch, owned=c.assignment or {})
        assert c.error == E.NONE
    group = ctx.consumer_group("g")
    assert a not in group.members and b not in group.members and c.member_id in group.members


def test_replay_after_upgrade_and_downgrade(ctx):
    """Records out, replay in: a fresh shard replaying the log equals the live one after an upgrade, and after
    the downgrade (the classic group's stored generation)."""
    a, b = classic_group(ctx)
    c = ctx.heartbeat("g", "", 0, topics=["foo"])
    ctx.join("g", a, protocols=[("range", sub())])

    def fresh():
        f = ConsumerGroupContext(topics={"foo": 6})
        f.gc.load_partition(ctx.gc.partition_for("g"), [(k, v) for k, v, _ in ctx.writer.records])
        return f

    live, loaded = ctx.consumer_group("g"), fresh().consumer_group("g")
    for attr in ("group_epoch", "assignment_epoch", "members", "target_assignment", "partition_epochs",
                 "num_classic_members"):
        assert getattr(loaded, attr) == getattr(live, attr), attr
    assert fresh().group("g") is None
    ctx.heartbeat("g", c.member_id, -1)
    f = fresh()
    assert f.consumer_group("g") is None and f.group("g").stored == ctx.group("g").stored
    assert assignment_from_bytes(ctx.group("g").stored.members[0].assignment, ctx.topics)


def test_a_classic_record_for_a_consumer_group_id_is_ignored(ctx):
    """Kafka applies an upgrade's records at once, so no classic write can follow it. Here classic requests for
    an id whose consumer group has a write in flight queue behind it, so none should either; if a log still
    holds a classic GroupMetadata value after the upgrade, it is ignored live and on load alike (the consumer
    group holds the id), and deleting the consumer group deletes that value too: a reload brings nothing back."""
    c = ConsumerGroupContext(topics={"foo": 6}, group_initial_rebalance_delay_ms=0,
                             consumer_group_migration_policy="upgrade")
    a, b = classic_group(c)
    stale = c.group("g").stored
    x = c.heartbeat("g", "", 0, topics=["foo"])
    c.shard("g").write([(encode_group_metadata_key("g"), encode_group_metadata_value(stale), [])], lambda e: None)

    def reload():
        f = ConsumerGroupContext(topics={"foo": 6})
        f.gc.load_partition(c.gc.partition_for("g"), [(k, v) for k, v, _ in c.writer.records])
        return f

    assert c.group("g") is None and c.consumer_group("g") is not None
    assert reload().group("g") is None and reload().consumer_group("g") is not None
    c.heartbeat("g", x.member_id, -1)
    c.leave_async("g", (a, None, None), (b, None, None))
    assert c.consumer_group("g").is_empty()
    deleted = Capture()
    c.delete_groups(["g"], deleted)
    assert deleted.result == {"g": E.NONE}
    f = reload()
    assert f.group("g") is None and f.consumer_group("g") is None


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades(ctx):
    """classicGroupJoinToConsumerGroup step 4: getOrMaybeSubscribeStaticConsumerGroupMember replaces the static
    member (replaceMember), then validateOnlineDowngradeWithReplacedMember / convertToClassicGroup with the joining
    member (ConsumerGroup.createGroupTombstoneRecordsWithReplacedMember, ClassicGroup.fromConsumerGroup: the joiner
    takes the replaced member's target). Same subscription: the classic group is Stable, no rebalance."""
    a, b = classic_group(ctx)
    x = ctx.heartbeat("g", "", 0, topics=["foo"], instance_id="i1")
    for _ in range(3):
        for mid in (a, b):
            j = ctx.join("g", mid, protocols=[("range", sub())]).result
            ctx.sync("g", mid, j.generation_id)
        x = ctx.heartbeat("g", x.member_id, x.member_epoch, owned=x.assignment or {}, instance_id="i1")
    group = ctx.consumer_group("g")
    target = group.target_assignment[x.member_id]
    assert target
    joined = ctx.join("g", "", instance_id="i1", protocols=[("range", sub())]).result
    assert joined.error == E.NONE and joined.protocol_type == "consumer"
    assert ctx.consumer_group("g") is None
    classic = ctx.group("g")
    assert classic.is_(GroupState.STABLE) and sorted(classic.members) == sorted([a, b, joined.member_id])
    assert classic.current_static_member_id("i1") == joined.member_id
    mine = assignment_from_bytes(classic.members[joined.member_id].assignment, ctx.topics)
    assert mine == target
    synced = ctx.sync("g", joined.member_id, classic.generation_id, instance_id="i1").result
    assert synced.error == E.NONE and assignment_from_bytes(synced.assignment, ctx.topics) == target
