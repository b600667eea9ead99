"""Handlers produce records; the response waits for them to be durable; state changes when they are
replayed. In the style of Kafka's GroupMetadataManagerTestContext / OffsetMetadataManagerTest: drive a
request, assert the exact records written and the response, with the injected clock."""
from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.testing import Capture, CoordinatorContext
from kcoord.protocol.consumer_offsets import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from kcoord.protocol.errors import ErrorCode as E

NOW = 1_700_000_000_000  # ManualClock's start


def decoded(records) -> list[tuple]:
    """Records as (kind, group, topic/partition or None, value or None)."""
    out = []
    for key, value, _headers in records:
        k = decode_key(key)
        if isinstance(k, OffsetCommitKey):
            out.append(("offset", k.group, (k.topic, k.partition),
                        None if value is None else decode_offset_commit_value(value)))
        else:
            assert isinstance(k, GroupMetadataKey)
            out.append(("group", k.group, None, None if value is None else decode_group_metadata_value(value)))
    return out


def test_offset_commit_writes_one_record_per_partition_and_applies_them_once_durable():
    """OffsetMetadataManager.commitOffset: one OffsetCommit record per partition; the response after the
    append, the offsets visible once replayed."""
    ctx = CoordinatorContext()
    ctx.writer.auto = False
    cap = Capture()
    ctx.commit_offsets("g", "", None, -1, [P("t", 0, 5, 3, "m"), P("t", 1, 9)], cap)
    (append,) = ctx.writer.pending()
    assert decoded(append.records) == [
        ("offset", "g", ("t", 0), OffsetCommitValue(5, "m", NOW, 3, -1)),
        ("offset", "g", ("t", 1), OffsetCommitValue(9, "", NOW, -1, -1))]
    assert not cap.called and "g" not in ctx.groups  # nothing applied before the record is durable
    ctx.writer.complete_all()
    assert cap.result == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert {tp: v.offset for tp, v in ctx.offsets("g").items()} == {("t", 0): 5, ("t", 1): 9}


def test_sync_group_writes_the_group_with_the_leaders_assignment():
    """The leader's SyncGroup: one GroupMetadata record (generation, protocol, leader, each member's
    subscription and assignment); the members are answered once it is durable and replayed."""
    ctx = CoordinatorContext(group_initial_rebalance_delay_ms=0)
    a = ctx.join_new_member("g", client_id="a")
    ctx.sleep(1)
    leader = a.result.member_id
    ctx.writer.clear()
    ctx.writer.auto = False
    sync = ctx.sync("g", leader, 1, {leader: b"A"})
    (append,) = ctx.writer.pending()
    ((kind, group, _, value),) = decoded(append.records)
    assert (kind, group, value.generation, value.protocol, value.leader) == ("group", "g", 1, "range", leader)
    assert [(mm.member_id, mm.subscription, mm.assignment) for mm in value.members] == [(leader, b"r", b"A")]
    assert not sync.called and ctx.group("g").stored is None
    ctx.writer.complete_all()
    assert (sync.result.error, sync.result.assignment) == (E.NONE, b"A")
    assert ctx.group("g").stored == value


def test_delete_groups_writes_offset_tombstones_then_the_group_tombstone():
    """GroupCoordinatorShard.deleteGroups: every offset's tombstone and the group's; the group is gone once
    they are durable, and a failed write leaves it as it was."""
    ctx = CoordinatorContext()
    ctx.commit_offsets("g", "", None, -1, [P("t", 0, 1), P("u", 2, 1)], Capture())
    ctx.writer.clear()
    ctx.writer.auto_error = E.KAFKA_STORAGE_ERROR
    failed = Capture()
    ctx.delete_groups(["g"], failed)
    assert failed.result == {"g": E.NOT_COORDINATOR}  # KAFKA_STORAGE_ERROR, as Kafka maps it
    assert "g" in ctx.groups and set(ctx.offsets("g")) == {("t", 0), ("u", 2)}
    ctx.writer.auto_error = E.NONE
    ctx.writer.clear()
    done = Capture()
    ctx.delete_groups(["g"], done)
    assert decoded(ctx.writer.records) == [("offset", "g", ("t", 0), None), ("offset", "g", ("u", 2), None),
                                           ("group", "g", None, None)]
    assert done.result == {"g": E.NONE} and "g" not in ctx.groups


def test_offset_expiry_writes_tombstones_and_the_group_goes_with_its_last_offset():
    """OffsetMetadataManager.cleanupExpiredOffsets + GroupMetadataManager.maybeDeleteGroup: expired offsets'
    tombstones, and the group's once it is Empty without offsets."""
    ctx = CoordinatorContext(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    ctx.commit_offsets("g", "", None, -1, [P("t", 0, 1)], Capture())
    ctx.writer.clear()
    ctx.writer.auto = False
    ctx.sleep(61_000)
    assert decoded(ctx.writer.pending()[0].records) == [("offset", "g", ("t", 0), None), ("group", "g", None, None)]
    assert "g" in ctx.groups  # not before the tombstones are durable
    ctx.writer.complete_all()
    assert "g" not in ctx.groups


def test_deleted_topics_take_their_offsets_with_them():
    """GroupCoordinatorShard.onPartitionsDeleted: tombstones for the deleted topics' offsets in every group."""
    ctx = CoordinatorContext()
    ctx.commit_offsets("a", "", None, -1, [P("gone", 0, 1), P("kept", 0, 1)], Capture())
    ctx.writer.clear()
    assert ctx.gc.handle_topics_deleted(["gone"]) == 1
    assert decoded(ctx.writer.records) == [("offset", "a", ("gone", 0), None)]
    assert set(ctx.offsets("a")) == {("kept", 0)}


def test_a_group_tombstone_keeps_members_who_joined_while_it_was_in_flight():
    """The group was Empty when it was deleted, but a member joined before the tombstones were durable: the
    stored value goes, the live member stays (its next generation's record puts the group back in the log)."""
    ctx = CoordinatorContext(group_initial_rebalance_delay_ms=60_000)
    ctx.commit_offsets("g", "", None, -1, [P("t", 0, 1)], Capture())
    ctx.writer.auto = False
    deleted = Capture()
    ctx.delete_groups(["g"], deleted)
    member_id = ctx.join("g", client_id="late").result.member_id  # MEMBER_ID_REQUIRED
    joined = ctx.join("g", member_id, client_id="late")  # parked behind the initial rebalance delay
    ctx.writer.complete_all()
    assert deleted.result == {"g": E.NONE}
    group = ctx.group("g")
    assert group is not None and list(group.members) == [member_id] and not joined.called
    assert group.stored is None and ctx.offsets("g") == {}
