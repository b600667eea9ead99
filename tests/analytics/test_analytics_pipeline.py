"""The pipeline on Spark (local[2]) over a store with a known history (scenario.py)."""
import os
import subprocess

import matplotlib.image
import pyarrow.parquet as pq
import pytest

from kcoord.analytics import burrow, cli, pipeline, tables
from tests.analytics import scenario

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    out = tmp_path_factory.mktemp("out")
    store = scenario.build(str(root))
    assert cli.main(["all", "--log-dirs", str(root), "--out", str(out)], spark=spark) == 0
    as_of = pq.read_table(pipeline.table_dir(str(out), "health_groups")).column("as_of_ms")[0].as_py()
    return store, str(out), as_of


def rows(out, name):
    return pq.read_table(pipeline.table_dir(out, name)).to_pylist()


def test_every_commit_is_present_and_the_aborted_one_is_not(run):
    store, out, _ = run
    got = sorted((r["group"], r["topic"], r["partition"], r["current_offset"], r["commit_timestamp"])
                 for r in rows(out, "offset_commits"))
    assert got == sorted(store.commits)
    assert not set(store.aborted) & set(got)


def test_generations_and_their_member_sets_are_exact(run):
    store, out, _ = run
    gens = sorted((r["group"], r["generation"], r["log_offset"]) for r in rows(out, "generations"))
    assert gens == sorted((x.group, x.generation, x.log_offset) for x in store.generations)
    members = {}
    for r in rows(out, "generation_members"):
        members.setdefault((r["group"], r["generation"]), {})[r["consumer_id"]] = {
            a["topic"]: [] for a in r["assignment"]}
        for a in r["assignment"]:
            members[(r["group"], r["generation"])][r["consumer_id"]][a["topic"]].append(a["partition"])
    expected = {(x.group, x.generation): x.members for x in store.generations if x.members}
    assert members == expected


def owners(members):
    return {(t, p): m for m, a in members.items() for t, ps in a.items() for p in ps}


def test_each_rebalance_has_the_cause_of_what_happened(run):
    store, out, _ = run
    got = {(r["group"], r["generation"]): r for r in rows(out, "rebalances")}
    assert set(got) == {(x.group, x.generation) for x in store.generations}
    for x in store.generations:
        r = got[(x.group, x.generation)]
        if x.group == "payments":
            assert (r["cause"], r["cause_source"]) == (x.cause, "header")
        else:
            assert (r["cause"], r["cause_source"]) == (scenario.EXPECTED_LEGACY_CAUSES[x.generation],
                                                       "inferred")
        prev = [p for p in store.generations if p.group == x.group and p.log_offset < x.log_offset]
        before = prev[-1].members if prev else {}
        assert sorted(r["members_joined"]) == sorted(set(x.members) - set(before))
        assert sorted(r["members_left"]) == sorted(set(before) - set(x.members))
        assert r["partitions_moved"] == len({tp for tp in owners(before).keys() | owners(x.members).keys()
                                             if owners(before).get(tp) != owners(x.members).get(tp)})
    # payments gen 3 -> 4: b was killed; orders-1 went to a, orders-2 to c.
    r4 = got[("payments", 4)]
    assert (r4["members_joined"], sorted(r4["members_left"]), sorted(r4["members_kept"])) == ([], ["b"], ["a", "c"])
    assert r4["partitions_moved"] == 2
    assert (r4["join_ms"], r4["sync_ms"], r4["rebalance_ms"]) == (45000, 25, 45025)
    # The commit gap spans the rebalance: last commit before it began to the first after it.
    gen4 = next(x for x in store.generations if (x.group, x.generation) == ("payments", 4))
    before = max(c[4] for c in store.commits if c[0] == "payments" and c[4] < gen4.timestamp - 45025)
    after = min(c[4] for c in store.commits if c[0] == "payments" and c[4] > gen4.timestamp)
    assert r4["pause_ms"] == after - before
    assert got[("payments", 6)]["is_empty"] and got[("payments", 6)]["pause_ms"] is None


def expected_lag(store, topic, partition, offset, ts):
    leo = max((end for t, end in store.produced[(topic, partition)] if t <= ts), default=None)
    return None if leo is None else max(leo - offset, 0)


def test_lag_equals_the_log_end_as_of_each_commit_minus_the_commit(run):
    store, out, _ = run
    got = sorted((r["group"], r["topic"], r["partition"], r["current_offset"], r["timestamp"], r["lag"])
                 for r in rows(out, "lag"))
    want = sorted((gr, t, p, o, ts, expected_lag(store, t, p, o, ts)) for gr, t, p, o, ts in store.commits)
    assert got == want
    assert any(r[5] for r in got)                  # the scenario does build up lag


def test_lag_names_the_owner_from_the_generation_in_effect(run):
    store, out, _ = run
    for r in rows(out, "lag"):
        gen = [x for x in store.generations if x.group == r["group"] and x.log_offset < r["log_offset"]][-1]
        owner = [m for m, a in gen.members.items() if r["partition"] in a.get(r["topic"], [])]
        assert [r["consumer_id"]] == (owner or [None])
        if owner:
            assert r["client_id"] == f"client-{owner[0]}" and r["generation"] == gen.generation


def test_health_applies_burrows_rules_to_each_partition_window(run):
    store, out, as_of = run
    assert as_of == max([c[4] for c in store.commits] + [x.timestamp for x in store.generations]
                        + [t for series in store.produced.values() for t, _ in series])
    since = as_of - burrow.INTERVALS * burrow.OFFSET_REFRESH_MS
    want = {}
    for key in {c[:3] for c in store.commits}:
        mine = [c for c in store.commits if c[:3] == key][-burrow.INTERVALS:]
        series = store.produced[key[1:]]
        leo = max(end for _, end in series)
        heads = [end for t, end in series if since < t <= as_of]
        heads += [max(end for t, end in series if t <= since)]
        w = burrow.Window([c[3] for c in mine], [c[4] for c in mine],
                          [expected_lag(store, *c[1:]) for c in mine])
        want[key] = (burrow.partition_status(w, max(leo - mine[-1][3], 0), as_of, heads),
                     max(leo - mine[-1][3], 0))
    got = {(r["group"], r["topic"], r["partition"]): (r["status"], r["current_lag"]) for r in rows(out, "health")}
    assert got == want
    assert len({s for s, _ in want.values()}) > 1          # the scenario exercises more than one rule
    groups = {r["group"]: r for r in rows(out, "health_groups")}
    for group in ("payments", "legacy"):
        assert groups[group]["status"] == burrow.group_status(
            [s for k, (s, _) in want.items() if k[0] == group])
        assert groups[group]["totallag"] == sum(lag for k, (_, lag) in want.items() if k[0] == group)


def test_since_and_group_filter_cut_the_tables_but_keep_the_context(run, spark, tmp_path):
    store, full_out, _ = run
    lo = min(c[4] for c in store.commits if c[0] == "legacy")
    out = str(tmp_path / "scoped")
    pipeline.ingest(spark, store.root, out, tables.Scope(since_ms=lo + 1, group_filter="^leg"))
    got = sorted(r["commit_timestamp"] for r in rows(out, "offset_commits"))
    assert got == sorted(c[4] for c in store.commits if c[0] == "legacy" and c[4] > lo)
    # Lag and causes after `since` are what the unscoped run says: the context before it was used.
    full = {(r["partition"], r["timestamp"]): r["lag"] for r in rows(full_out, "lag") if r["group"] == "legacy"}
    scoped = {(r["partition"], r["timestamp"]): r["lag"] for r in rows(out, "lag")}
    assert scoped and scoped == {k: v for k, v in full.items() if k[1] > lo}
    assert {r["generation"]: r["cause"] for r in rows(out, "rebalances")} == {
        g: c for g, c in scenario.EXPECTED_LEGACY_CAUSES.items() if g > 1}


def test_a_store_without_pushed_client_metrics_has_no_table_nor_section_for_them(run):
    """Telemetry off (no kcoord-client-telemetry/ in the log dir): the report says nothing about it."""
    _, out, _ = run
    assert not any(os.path.exists(pipeline.table_dir(out, name)) for name in pipeline.CLIENT_METRICS)
    assert "KIP-714" not in open(os.path.join(out, "report.html"), encoding="utf-8").read()


def test_times_are_epoch_ms_or_iso():
    assert cli.parse_time("1700000000000") == 1_700_000_000_000
    assert cli.parse_time("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert cli.parse_time("2023-11-14T23:13:20+01:00") == 1_700_000_000_000


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.mark.skipif(not os.path.exists(CHROMIUM),
                    reason="headless Chromium not installed (apt-get install -y chromium)")
def test_the_report_renders_offline_in_headless_chromium_with_its_charts(run, tmp_path):
    _, out, _ = run
    page = os.path.join(out, "report.html")
    text = open(page, encoding="utf-8").read()
    assert "http://" not in text and "https://" not in text and "<link" not in text     # self-contained
    assert text.count('src="data:image/png;base64,') == 4

    def chromium(*args):
        return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args,
                               "file://" + page], capture_output=True, text=True, timeout=120)

    dom = chromium("--virtual-time-budget=5000", "--dump-dom")
    assert 'data-charts-decoded="4"' in dom.stdout, dom.stderr[-2000:]
    shot = tmp_path / "report.png"
    chromium("--window-size=1200,2400", f"--screenshot={shot}")
    image = matplotlib.image.imread(shot)
    assert image.shape[:2] == (2400, 1200)
    ink = (image[:, :, :3].mean(axis=2) < 0.9).mean()          # share of non-white pixels
    assert 0.02 < ink < 0.9
    assert image[:, :, :3].std() > 0.05
