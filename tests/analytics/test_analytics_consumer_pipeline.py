"""The pipeline on Spark over a store holding classic groups (scenario.py) and KIP-848 consumer groups
(consumer_store.py) side by side: the classic rows stay what they were, every group epoch is a
generation with its members, target and cause, and the report lists the consumer groups."""
import pyarrow.parquet as pq
import pytest

from kcoord.analytics import cli, pipeline
from tests.analytics import consumer_store, scenario

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    root, out = tmp_path_factory.mktemp("mixed-store"), tmp_path_factory.mktemp("mixed-out")
    store = scenario.build(str(root))
    epochs = consumer_store.write(store)
    assert cli.main(["all", "--log-dirs", str(root), "--out", str(out)], spark=spark) == 0
    return store, epochs, str(out)


def rows(out, name, consumer=None):
    got = pq.read_table(pipeline.table_dir(out, name)).to_pylist()
    if consumer is None:
        return got
    return [r for r in got if (r["group"].startswith("cg-")) == consumer]


def test_classic_generations_are_unchanged(run):
    store, _, out = run
    gens = sorted((r["group"], r["generation"], r["log_offset"], r["group_type"]) for r in rows(out, "generations", False))
    assert gens == sorted((x.group, x.generation, x.log_offset, "classic") for x in store.generations)
    got = {(r["group"], r["generation"]): r for r in rows(out, "rebalances", False)}
    for x in store.generations:
        r = got[(x.group, x.generation)]
        want = x.cause if x.group == "payments" else scenario.EXPECTED_LEGACY_CAUSES[x.generation]
        assert (r["cause"], r["inferred_cause"] if x.group == "legacy" else want) == (want, want)
        assert r["reconcile_ms"] is None


def test_every_group_epoch_is_a_generation_with_its_members_and_target(run):
    _, epochs, out = run
    gens = rows(out, "generations", True)
    assert sorted(r["group"] for r in gens if r["tombstone"]) == sorted(consumer_store.deleted_groups())
    got = {(r["group"], r["generation"]): r for r in gens if not r["tombstone"]}
    assert set(got) == {(e.group, e.epoch) for e in epochs}
    members = {}
    for m in rows(out, "generation_members", True):
        members.setdefault((m["group"], m["generation"]), {})[m["consumer_id"]] = m
    for e in epochs:
        r = got[(e.group, e.epoch)]
        assert (r["group_type"], r["protocol_type"], r["member_count"], r["timestamp"]) == (
            "consumer", "consumer", len(e.members), e.timestamp)
        ms = members.get((e.group, e.epoch), {})
        assert set(ms) == e.members
        if e.target is not None:
            assert {mid: {(a["topic"], a["partition"]) for a in m["assignment"]} for mid, m in ms.items()} == e.target
        assert r["reconcile_ms"] == (None if e.reconciled is None else e.reconciled - e.timestamp)
    m2 = members[("cg-orders", 4)]["m2"]
    assert (m2["member_epoch"], m2["assigned_partitions"], len(m2["current_assignment"])) == (3, 5, 4)
    assert members[("cg-orders", 5)]["m3"]["subscribed_topic_regex"] == "ev.*"


def test_each_epoch_bump_is_a_rebalance_with_the_cause_the_records_show(run):
    _, epochs, out = run
    got = {(r["group"], r["generation"]): r for r in rows(out, "rebalances", True)}
    assert {k: (r["cause"], r["cause_source"]) for k, r in got.items()} == {
        (e.group, e.epoch): (e.cause, "inferred") for e in epochs}
    r2 = got[("cg-orders", 2)]
    assert (r2["members_joined"], r2["members_kept"], r2["partitions_moved"]) == (["m2"], ["m1"], 2)
    assert r2["rebalance_ms"] == 500
    r7 = got[("cg-orders", 7)]
    assert (r7["members_left"], r7["cause_detail"]) == (["m1"], "removed: m1")
    assert got[("cg-deleted", 2)]["is_empty"]


def test_the_report_lists_the_consumer_groups(run):
    _, _, out = run
    text = open(f"{out}/report.html", encoding="utf-8").read()
    assert "Consumer groups (KIP-848), latest epoch" in text
    section = text[text.index("Consumer groups (KIP-848)"):]
    for group, fragment in (("cg-orders", "member_removed"), ("cg-deleted", "deleted"),
                            ("cg-migrated", "target not computed"), ("cg-hashed", "metadata_changed")):
        row = section[section.index(f"<td>{group}</td>"):]
        assert fragment in row[:row.index("</tr>")], (group, row[:600])
    assert "<th>reconcile (ms)</th>" in text
    assert "<td>cg-orders</td>" in section and "<td>payments</td>" not in section
