"""DescribeGroups, ListGroups, DeleteGroups, OffsetDelete."""
from kcoord.coordinator.consumer_protocol import encode_subscription, subscription_topics
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.testing import Capture
from kcoord.protocol.errors import ErrorCode as E

S = GroupState


def test_describe_stable_group_has_metadata_and_assignment(ctx):
    leader, follower = ctx.stable_group("g", 2)
    d, = ctx.describe_groups(["g"])
    assert (d.error, d.state, d.protocol_type, d.protocol_data) == (E.NONE, "Stable", "consumer", "range")
    assert [(m.member_id, m.metadata, m.assignment) for m in d.members] == [
        (leader, b"r", leader.encode()), (follower, b"r", follower.encode())]


def test_describe_other_states_and_unknown(ctx):
    leader, follower = ctx.stable_group("g", 2)
    ctx.join("g", leader)
    d, unknown = ctx.describe_groups(["g", "nope"])
    assert d.state == "PreparingRebalance" and d.protocol_data == ""
    assert all(m.metadata == b"" and m.assignment == b"" for m in d.members)
    assert (unknown.state, unknown.error) == ("Dead", E.NONE)
    assert ctx.describe_groups(["nope"], request_version=6)[0].error == E.GROUP_ID_NOT_FOUND


def test_list_groups_with_states_filter(ctx):
    ctx.stable_group("a", 1)
    ctx.join("b")  # Empty, pending member only
    all_groups = {g.group_id: g.state for g in ctx.list_groups()}
    assert all_groups == {"a": "Stable", "b": "Empty"}
    assert [g.group_id for g in ctx.list_groups(["STABLE"])] == ["a"]
    assert [g.group_id for g in ctx.list_groups(["empty", "dead"])] == ["b"]


def test_delete_groups_errors_and_tombstones(ctx):
    leader, = ctx.stable_group("busy", 1)
    cap = Capture()
    ctx.commit_offsets("idle", "", None, -1, [P("t", 0, 1), P("t", 1, 1)], cap)
    ctx.writer.clear()
    out = Capture()
    ctx.delete_groups(["busy", "idle", "nope"], out)
    assert out.result == {"busy": E.NON_EMPTY_GROUP, "idle": E.NONE, "nope": E.GROUP_ID_NOT_FOUND}
    assert [v for _, v, _ in ctx.writer.records] == [None, None, None]
    assert "idle" not in ctx.groups


def test_offset_delete(ctx):
    sub = encode_subscription(["orders", "payments"])
    assert subscription_topics(sub) == {"orders", "payments"}
    cap = ctx.join("g", instance_id="i", protocols=[("range", sub)])
    ctx.sleep(3000)
    m = cap.result.member_id
    ctx.sync("g", m, 1, {m: b""}, instance_id="i")
    c = Capture()
    ctx.commit_offsets("g", m, "i", 1, [P("orders", 0, 1), P("old", 0, 1)], c)
    out = Capture()
    ctx.delete_offsets("g", [("orders", 0), ("old", 0), ("never", 3)], out)
    top, per = out.result
    assert top == E.NONE
    assert per == {("orders", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): E.NONE, ("never", 3): E.NONE}
    assert set(ctx.offsets("g")) == {("orders", 0)}
    out2 = Capture()
    ctx.delete_offsets("nope", [("t", 0)], out2)
    assert out2.result == (E.GROUP_ID_NOT_FOUND, {})


def test_offset_delete_non_consumer_group_not_empty(ctx):
    c = ctx.join("g", instance_id="i", protocol_type="connect")
    ctx.sleep(3000)
    assert c.result.error == E.NONE
    out = Capture()
    ctx.delete_offsets("g", [("t", 0)], out)
    assert out.result == (E.NON_EMPTY_GROUP, {})


def test_subscription_decoder_rejects_garbage():
    assert subscription_topics(b"") is None
    assert subscription_topics(b"\x00\x00\x00\x00\x00\x05\x00") is None


def test_deleting_a_topic_tombstones_its_offsets_in_every_group(ctx):
    cap = Capture()
    ctx.commit_offsets("a", "", None, -1, [P("gone", 0, 1), P("kept", 0, 1)], cap)
    ctx.commit_offsets("b", "", None, -1, [P("gone", 3, 1)], cap)
    ctx.writer.clear()
    assert ctx.gc.handle_topics_deleted(["gone"]) == 2
    from kcoord.protocol.consumer_offsets import OffsetCommitKey, decode_key
    assert sorted(((decode_key(k), v) for k, v, _ in ctx.writer.records), key=lambda r: r[0].group) == [
        (OffsetCommitKey("a", "gone", 0), None), (OffsetCommitKey("b", "gone", 3), None)]
    assert set(ctx.offsets("a")) == {("kept", 0)} and not ctx.offsets("b")
