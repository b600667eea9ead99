"""The HTML report at both ends: a store with one group, one commit and no lag says "not enough data"
instead of drawing degenerate charts; a store with more groups than the report's top-N shows the top N
and says of how many. Times read as dates (UTC), never epoch milliseconds; every chart's axes carry
units. Each report is rendered in headless Chromium (Debian's, installed by
scripts/ensure-test-tools.sh) and its screenshot checked; set KCOORD_REPORT_SHOTS=DIR to keep them."""
import os
import re
import shutil
import subprocess

import matplotlib.image
import pytest

from kcoord.analytics import cli, report
from tests.analytics import report_stores

pytestmark = pytest.mark.spark

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
EPOCH_MS = re.compile(r"\b1[5-9]\d{11}\b")  # 2017..2033 as epoch milliseconds


@pytest.fixture
def charts(monkeypatch):
    """The axis labels of every chart the report draws."""
    drawn = []
    real_png = report._png

    def recording_png(fig):
        for ax in fig.axes:
            categorical = any(t.get_text() and not _numeric(t.get_text()) for t in ax.get_yticklabels())
            drawn.append((ax.get_xlabel(), ax.get_ylabel(), categorical))
        return real_png(fig)

    monkeypatch.setattr(report, "_png", recording_png)
    return drawn


def _numeric(text):
    return re.fullmatch(r"[-−\d.,]+", text) is not None


def render(spark, tmp_path, name, build):
    root, out = tmp_path / f"{name}-store", tmp_path / f"{name}-out"
    build(str(root))
    assert cli.main(["all", "--log-dirs", str(root), "--out", str(out)], spark=spark) == 0
    return (out / "report.html").read_text(encoding="utf-8"), out / "report.html"


def screenshot(page, tmp_path, name, images):
    if not os.path.exists(CHROMIUM):
        pytest.skip("headless Chromium not installed (scripts/ensure-test-tools.sh installs it)")

    def chromium(*args):
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args,
                               f"file://{page}"], capture_output=True, text=True, timeout=120)

    dom = chromium("--virtual-time-budget=5000", "--dump-dom")
    assert f'data-charts-decoded="{images}"' in dom.stdout, dom.stderr[-2000:]
    shot = tmp_path / f"report-{name}.png"
    chromium("--window-size=1200,2400", f"--screenshot={shot}")
    if os.environ.get("KCOORD_REPORT_SHOTS"):
        shutil.copy(shot, os.path.join(os.environ["KCOORD_REPORT_SHOTS"], shot.name))
    image = matplotlib.image.imread(shot)
    assert image.shape[:2] == (2400, 1200)
    return image[:, :, :3]


def test_a_small_store_says_not_enough_data(spark, tmp_path, charts):
    text, page = render(spark, tmp_path, "small", report_stores.small)
    assert charts == [] and 'src="data:image/png' not in text  # no degenerate chart at all
    assert text.count("Not enough data for a chart") == 3
    assert "no group has any lag (solo: OK)" in text
    assert "one commit, at 2023-11-14 22:13:21 UTC; the lag then was 0 records" in text
    assert "one rebalance (initial_join) at 2023-11-14 22:13:20 UTC" in text
    assert "As of 2023-11-14 22:13:21 UTC · 1 offset commit · 1 generation · 1 rebalance" in text
    assert not EPOCH_MS.search(text)
    image = screenshot(page, tmp_path, "small", 0)
    ink = (image.mean(axis=2) < 0.9).mean()  # text and two tables on white
    assert 0.005 < ink < 0.3


def test_a_large_store_shows_the_top_n_and_says_of_how_many(spark, tmp_path, charts):
    text, page = render(spark, tmp_path, "large", report_stores.large)
    assert text.count('src="data:image/png;base64,') == 4 and "Not enough data" not in text
    assert "Health status per group, top 30 of 40 by total lag" in text
    assert "Lag over time, top 5 of 40 groups by peak lag" in text
    assert "Groups (Burrow), top 30 of 40 by total lag" in text
    assert f"Latest {report.RECENT_REBALANCES} of 236 rebalances" in text
    assert "<th>time (UTC)</th>" in text and "<th>join (ms)</th>" in text
    assert not EPOCH_MS.search(text)
    assert len(charts) == 4
    for xlabel, ylabel, categorical in charts:  # units on both axes (a categorical axis names itself)
        assert re.search(r"\((records|UTC)|seconds|rebalances|hour", xlabel), xlabel
        assert categorical or re.search(r"\(records\)|generations|rebalances per hour", ylabel), ylabel
    assert ("time (UTC)", "total lag (records)", False) in charts
    assert ("hour (UTC)", "rebalances per hour", False) in charts
    image = screenshot(page, tmp_path, "large", 4)
    assert 0.02 < (image.mean(axis=2) < 0.9).mean() < 0.9
    assert image.std() > 0.05
