"""Checkpoints of a __consumer_offsets partition: checkpoint + tail replay == full replay, and a
checkpoint that is torn, altered, foreign or stale is refused (the caller then replays the log)."""
from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.coordinator import checkpoint
from kcoord.coordinator.consumer import records as cr
from kcoord.coordinator.consumer.member import ConsumerGroupMember
from kcoord.coordinator.partition_state import PartitionState
from kcoord.coordinator.testing import CoordinatorContext
from kcoord.protocol import consumer_offsets as co

LOG = logging.getLogger("test.checkpoint")
NOW = 1_700_000_000_000

groups = st.sampled_from(["a", "b", "c", "grüppe"])
topics = st.sampled_from(["t", "u"])
partitions = st.integers(0, 3)


def _member(i: int, static: bool) -> co.MemberMetadataValue:
    return co.MemberMetadataValue(f"m{i}", f"i{i}" if static else None, "client", "/127.0.0.1", 30000, 10000,
                                  b"sub", f"assign-{i}".encode())


commit = st.builds(
    lambda g, t, p, offset, meta, epoch, expire: (
        co.encode_offset_commit_key(g, t, p),
        co.encode_offset_commit_value(co.OffsetCommitValue(offset, meta, NOW - 5, epoch, expire))),
    groups, topics, partitions, st.integers(0, 2**40), st.sampled_from(["", "meta", "ü"]),
    st.integers(-1, 5), st.sampled_from([-1, NOW + 1000]))
offset_tombstone = st.builds(lambda g, t, p: (co.encode_offset_commit_key(g, t, p), None), groups, topics, partitions)
group_metadata = st.builds(
    lambda g, generation, n, static: (
        co.encode_group_metadata_key(g),
        co.encode_group_metadata_value(co.GroupMetadataValue(
            "consumer", generation, "range" if n else None, "m0" if n else None, NOW - 7,
            [_member(i, static) for i in range(n)]))),
    groups, st.integers(0, 9), st.integers(0, 3), st.booleans())
group_tombstone = st.builds(lambda g: (co.encode_group_metadata_key(g), None), groups)
# Records the classic coordinator skips: another coordinator's key version, and garbage.
foreign = st.sampled_from([(b"\x00\x05\x00\x01x", b"whatever"), (b"\x00\x01\x00", b"\x00")])
# KIP-848 consumer group records (kept raw in the state, replayed by the consumer group manager on load)
_member_ids = st.sampled_from(["a", "b"])
consumer_record = st.one_of(
    st.builds(lambda g, e: cr.group_epoch_record(g, e)[:2], groups, st.integers(0, 9)),
    st.builds(lambda g: cr.group_epoch_tombstone(g)[:2], groups),
    st.builds(lambda g, m, t: cr.member_subscription_record(g, ConsumerGroupMember(m, subscribed_topic_names=t))[:2],
              groups, _member_ids, st.frozensets(topics)),
    st.builds(lambda g, m: cr.member_subscription_tombstone(g, m)[:2], groups, _member_ids),
    st.builds(lambda g, e: cr.target_epoch_record(g, e)[:2], groups, st.integers(0, 9)),
)
record = st.one_of(commit, commit, offset_tombstone, group_metadata, group_tombstone, foreign, consumer_record)
histories = st.lists(record, max_size=60)


def _replayed(records, state=None) -> PartitionState:
    state = PartitionState() if state is None else state
    state.replay(records, LOG)
    return state


def _through_checkpoint(records, split: int, partition: int = 7) -> PartitionState:
    data = checkpoint.encode(_replayed(records[:split]), partition, split, NOW)
    offset, written_ms, state = checkpoint.decode(data, partition)
    assert (offset, written_ms) == (split, NOW)
    return _replayed(records[split:], state)


def _groups_snapshot(ctx) -> dict:
    classic = {gid: (g.state, g.current_state_timestamp, g.generation_id, g.protocol_type, g.protocol_name,
                     g.leader_id, [(m.member_id, m.group_instance_id, m.assignment, m.session_timeout_ms)
                                   for m in g.all_member_metadata()],
                     dict(ctx.offsets(gid)))
               for gid, g in sorted(ctx.groups.items())}
    consumer = {gid: (g.group_epoch, g.assignment_epoch, g.members)
                for shard in ctx.gc.shards.values() for gid, g in sorted(shard.consumer_manager.groups.items())}
    return {"classic": classic, "consumer": consumer}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.data())
def test_checkpoint_then_tail_leaves_the_state_a_full_replay_leaves(records, data):
    split = data.draw(st.integers(0, len(records)))
    assert _through_checkpoint(records, split) == _replayed(records)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.data())
def test_refreshed_checkpoint_equals_a_full_replay(records, data):
    # A refresh decodes only the groups the tail touches and copies the others as they were.
    first, second = sorted(data.draw(st.lists(st.integers(0, len(records)), min_size=2, max_size=2)))
    old = checkpoint.encode(_replayed(records[:first]), 7, first, NOW)
    lazy = checkpoint.decode(old, 7, lazy=True).state
    refreshed = checkpoint.encode(_replayed(records[first:second], lazy), 7, second, NOW)
    assert _replayed(records[second:], checkpoint.decode(refreshed, 7).state) == _replayed(records)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.data())
def test_coordinator_loaded_from_checkpoint_serves_the_same_groups(records, data):
    split = data.draw(st.integers(0, len(records)))
    full, resumed = CoordinatorContext(), CoordinatorContext()
    full.gc.load_partition(7, records)
    data_ = checkpoint.encode(_replayed(records[:split]), 7, split, NOW)
    resumed.gc.load_partition(7, records[split:], checkpoint.decode(data_, 7).state)
    assert _groups_snapshot(resumed) == _groups_snapshot(full)


def test_state_applies_tombstones_and_keeps_no_empty_group():
    key = co.encode_offset_commit_key("g", "t", 0)
    value = co.encode_offset_commit_value(co.OffsetCommitValue(5, "", NOW))
    state = _replayed([(key, value), (co.encode_group_metadata_key("g"), None)])
    assert set(state.offsets["g"]) == {("t", 0)} and "g" not in state.metadata
    _replayed([(key, None)], state)
    assert state.groups() == set() and state.offsets == {}


@settings(max_examples=100, deadline=None)
@given(histories.filter(bool), st.data())
def test_any_altered_byte_is_refused(records, data):
    encoded = bytearray(checkpoint.encode(_replayed(records), 3, 42, NOW))
    at = data.draw(st.integers(0, len(encoded) - 1))
    encoded[at] ^= data.draw(st.integers(1, 255))
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.decode(bytes(encoded), 3)


@given(histories, st.data())
def test_torn_checkpoint_is_refused(records, data):
    encoded = checkpoint.encode(_replayed(records), 3, 42, NOW)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(checkpoint.CheckpointError):
        checkpoint.decode(encoded[:cut], 3)


def test_another_partitions_checkpoint_is_refused():
    encoded = checkpoint.encode(PartitionState(), 3, 42, NOW)
    with pytest.raises(checkpoint.CheckpointError, match="partition 3"):
        checkpoint.decode(encoded, 4)


def test_unknown_format_version_is_refused():
    encoded = bytearray(checkpoint.encode(PartitionState(), 3, 42, NOW))
    encoded[12:14] = (checkpoint.FORMAT_VERSION + 1).to_bytes(2, "big")
    encoded[8:12] = checkpoint.crc32c(bytes(encoded[12:])).to_bytes(4, "big")  # an intact file of a newer kcoord
    with pytest.raises(checkpoint.CheckpointError, match="unknown format"):
        checkpoint.decode(bytes(encoded), 3)
