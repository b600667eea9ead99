"""KIP-848 consumer group records (key types 3-8, 16) decoded and replayed into epochs, without Spark.

Layouts: Kafka 4's group-coordinator/src/main/resources/common/message/ConsumerGroup*{Key,Value}.json;
the records come from kcoord's own encoder (coordinator/consumer/records.py, Kafka's
GroupCoordinatorRecordHelpers) or are laid out by hand (consumer_store.py)."""
import collections
import glob
import os
import uuid

import pytest

from kcoord.analytics import consumer_epochs, segment
from kcoord.analytics import consumer_records as cr
from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.member import ConsumerGroupMember
from tests.analytics import consumer_store, scenario
from tests.analytics import storegen as g

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def test_member_metadata_value_fields():
    mem = ConsumerGroupMember("m-1", instance_id="i-1", rack_id="rack-a", client_id="cid", client_host="/10.0.0.1",
                              rebalance_timeout_ms=45000, subscribed_topic_names=frozenset({"b", "a"}),
                              subscribed_topic_regex="x.*", server_assignor_name="range")
    d = cr.decode(*r.member_subscription_record("grp", mem)[:2])
    assert (d["record_type"], d["group"], d["member_id"], d["tombstone"]) == (5, "grp", "m-1", False)
    assert (d["instance_id"], d["rack_id"], d["client_id"], d["client_host"]) == ("i-1", "rack-a", "cid", "/10.0.0.1")
    assert (d["subscribed_topic_names"], d["subscribed_topic_regex"]) == (["a", "b"], "x.*")
    assert (d["rebalance_timeout_ms"], d["server_assignor"], d["classic_session_timeout_ms"]) == (45000, "range", None)


def test_epochs_partition_metadata_and_assignments():
    assert cr.decode(*r.group_epoch_record("grp", 7, "member_joined")[:2])["epoch"] == 7
    assert cr.decode(*r.target_epoch_record("grp", 6)[:2])["epoch"] == 6
    meta = cr.decode(*r.subscription_metadata_record("grp", {"t1": (T1, 3), "t2": (T2, 1)})[:2])
    assert meta["topics"] == [(str(T1), "t1", 3), (str(T2), "t2", 1)]
    tgt = cr.decode(*r.target_member_record("grp", "m", {T1: frozenset({2, 0}), T2: frozenset({0})})[:2])
    assert (tgt["member_id"], tgt["partitions"]) == ("m", [(str(T1), 0), (str(T1), 2), (str(T2), 0)])
    mem = ConsumerGroupMember("m", member_epoch=5, previous_member_epoch=4, state=1,
                              assigned_partitions={T1: frozenset({1})}, partitions_pending_revocation={T2: frozenset({0})})
    cur = cr.decode(*r.current_assignment_record("grp", mem)[:2])
    assert (cur["epoch"], cur["previous_member_epoch"], cur["state"]) == (5, 4, 1)
    assert (cur["partitions"], cur["pending_revocation"]) == ([(str(T1), 1)], [(str(T2), 0)])


def test_tombstones_of_every_keyed_record():
    removal = r.member_removal("grp", "m") + r.group_deletion("grp")
    got = [(d["record_type"], d["member_id"], d["tombstone"]) for d in (cr.decode(k, v) for k, v, _h in removal)]
    assert got == [(8, "m", True), (7, "m", True), (5, "m", True), (6, None, True), (4, None, True), (3, None, True)]


def test_what_kcoord_does_not_write_regex_hash_and_classic_member():
    rx = cr.decode(*consumer_store.regex_record("grp", "ev.*", ["events", "ev2"], 3, 1234)[:2])
    assert (rx["record_type"], rx["regex"], rx["regex_topics"], rx["regex_version"], rx["regex_timestamp"]) == \
        (16, "ev.*", ["ev2", "events"], 3, 1234)
    assert cr.decode(consumer_store.regex_record("grp", "ev.*", [], 1, 1)[0], None)["tombstone"]
    hashed = cr.decode(*consumer_store.epoch_with_hash("grp", 9, -5)[:2])
    assert (hashed["epoch"], hashed["metadata_hash"]) == (9, -5)
    classic = cr.decode(*consumer_store.classic_member_record("grp", "k", ["t"], 45000)[:2])
    assert (classic["member_id"], classic["classic_session_timeout_ms"]) == ("k", 45000)


def test_other_record_types_are_not_consumer_records_and_malformed_ones_are_skipped():
    assert cr.record_type(g.group_metadata_key("grp")) is None
    assert cr.record_type(g.offset_commit_key("grp", "t", 0)) is None
    key, value, _ = r.current_assignment_record("grp", ConsumerGroupMember("m", member_epoch=1))
    assert cr.row(key, value[:-3], (0, 0, 0), {}) is None           # truncated value
    assert cr.row(key[:5], value, (0, 0, 0), {}) is None            # truncated key
    assert cr.row(key, b"\x00\x01" + value[2:], (0, 0, 0), {}) is None   # unknown value version


def test_cause_inference_from_member_sets_and_subscriptions():
    a = {"member_id": "a", "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
         "classic_session_timeout_ms": None}
    b = dict(a, member_id="b")
    assert consumer_epochs.infer_cause(None, {"a": a}, [], False)[0] == "member_joined"
    assert consumer_epochs.infer_cause({"a": a}, {"a": a, "b": b}, [], False) == ("member_joined", "joined: b")
    assert consumer_epochs.infer_cause({"a": a, "b": b}, {"a": a}, [], False) == ("member_removed", "removed: b")
    assert consumer_epochs.infer_cause({"a": a}, {"a": dict(a, subscribed_topic_regex="x")}, [], False)[0] == \
        "subscription_changed"
    assert consumer_epochs.infer_cause({"a": a}, {"a": a}, ["x"], True)[0] == "regex_resolved"
    assert consumer_epochs.infer_cause({"a": a}, {"a": a}, [], True)[0] == "metadata_changed"
    assert consumer_epochs.infer_cause({"a": a}, {"a": a}, [], False)[0] == "unknown"
    assert consumer_epochs.infer_cause(None, {"a": dict(a, classic_session_timeout_ms=1)}, [], False, 7)[0] == \
        "migration"
    assert consumer_epochs.infer_cause(None, {"a": a}, [], False, 4)[0] == "unknown"   # older epochs compacted


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("consumer-store"))
    store = scenario.Store(root)
    classic = g.group_metadata_value(1, "range", "c-1", scenario.T0, [
        {"member_id": "c-1", "client_id": "c", "host": "/h", "topics": ["orders"], "assignment": {"orders": [0]}}])
    store.writer(g.OFFSETS, scenario.offsets_partition("classic-g")).append(
        [(scenario.T0, g.group_metadata_key("classic-g"), classic, [])])
    return root, consumer_store.write(store)


def decoded(root, method):
    out = []
    for path in sorted(glob.glob(os.path.join(root, "__consumer_offsets-*", "*.log"))):
        part = int(os.path.basename(os.path.dirname(path)).rsplit("-", 1)[1])
        out += list(getattr(segment.SegmentDecoder(segment.read_file(path), part), method)())
    return out


def test_segments_of_a_mixed_store_split_into_classic_and_consumer_records(written):
    root, _ = written
    assert [(row[3], row[7]) for row in decoded(root, "group_rows")] == [("classic-g", 1)]
    rows = [dict(zip(cr.FIELDS, row, strict=True)) for row in decoded(root, "consumer_group_rows")]
    assert {x["group"] for x in rows} == {"cg-orders", "cg-deleted", "cg-migrated", "cg-hashed"}
    assert collections.Counter(x["record_type"] for x in rows)[16] == 1


def test_replay_gives_every_epoch_its_members_target_cause_and_reconciliation(written):
    root, truth = written
    by_group = collections.defaultdict(list)
    for row in decoded(root, "consumer_group_rows"):
        d = dict(zip(cr.FIELDS, row, strict=True))
        by_group[d["group"]].append(d)
    got = {}
    for group, records in by_group.items():
        records.sort(key=lambda x: (x["log_partition"], x["log_offset"]))
        got[group] = consumer_epochs.replay(records)
    tombstones = {gid: [x for x in rows if x["tombstone"]] for gid, rows in got.items()}
    assert {gid for gid, t in tombstones.items() if t} == consumer_store.deleted_groups()
    epochs = {(x["group"], x["generation"]): x for rows in got.values() for x in rows if not x["tombstone"]}
    assert set(epochs) == {(t.group, t.epoch) for t in truth}
    for t in truth:
        row = epochs[(t.group, t.epoch)]
        members = {m["member_id"]: m for m in row["members"]}
        targets = None if row["assignment_epoch"] is None else {
            mid: set(m["assignment"]) for mid, m in members.items()}
        assert (set(members), row["inferred_cause"], targets, row["timestamp"], row["reconciled_timestamp"]) == \
            (t.members, t.cause, t.target, t.timestamp, t.reconciled), (t.group, t.epoch, row["cause_detail"])
        assert row["protocol_type"] == "consumer" and row["cause"] is None   # no headers: inferred only
    m2 = {m["member_id"]: m for m in epochs[("cg-orders", 4)]["members"]}["m2"]
    assert (m2["member_epoch"], set(m2["current_assignment"])) == (3, {("orders", 2), ("orders", 3),
                                                                        ("events", 0), ("events", 1)})
    assert epochs[("cg-orders", 1)]["protocol"] == "range"
    assert {m["member_id"]: m for m in epochs[("cg-orders", 5)]["members"]}["m3"]["subscribed_topic_regex"] == "ev.*"
    assert epochs[("cg-migrated", 5)]["members"][0]["session_timeout_ms"] == 45000
