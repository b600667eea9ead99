"""A self-contained HTML report (no external JS/CSS: charts are matplotlib PNGs inlined as base64).

Aggregation runs on Spark; only small, already-aggregated frames reach pandas and matplotlib.
Every chart has units on its axes and times in UTC; a chart that would be degenerate (one point, one
bucket, all zeros) is replaced by a sentence saying what there is ("not enough data for a chart"); on
large stores charts and tables show the top N and say of how many.
"""
import base64
import datetime as dt
import html
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from pyspark.sql import Window  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from kcoord.analytics import pipeline  # noqa: E402

TOP_GROUPS = 5
HEALTH_ROWS = 30
RECENT_REBALANCES = 25
LAG_BUCKETS = 300
STATUS_COLOURS = {"OK": "#2e7d32", "WARN": "#f9a825", "ERR": "#c62828", "STOP": "#6a1b9a",
                  "STALL": "#ef6c00", "REWIND": "#1565c0"}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _chart(title, fig, caption=""):
    return (f'<section class="chart"><h2>{html.escape(title)}</h2>'
            f'<img alt="{html.escape(title)}" src="data:image/png;base64,{_png(fig)}">'
            f"<p>{html.escape(caption)}</p></section>")


def _empty(title, why):
    return f'<section class="chart"><h2>{html.escape(title)}</h2><p class="none">{html.escape(why)}</p></section>'


def _not_enough(title, what):
    return _empty(title, f"Not enough data for a chart: {what}.")


def when(ms) -> str:
    """Epoch milliseconds as people read them: 2023-11-14 22:13:20 UTC."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _time_axis(ax, label="time (UTC)"):
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel(label)


def _counts_from_zero(axis):
    axis.set_major_locator(MaxNLocator(integer=True))


def _plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _top_note(shown, total, what):
    return f" Showing the top {shown} of {total} {what}." if total > shown else ""


def _table(title, df: pd.DataFrame):
    if df.empty:
        return _empty(title, "nothing to show")
    body = df.to_html(index=False, escape=True, border=0, classes="t", na_rep="")
    return f"<section><h2>{html.escape(title)}</h2>{body}</section>"


def lag_over_time(spark, out):
    lag = pipeline.read(spark, out, "lag").where(F.col("lag").isNotNull())
    peaks = lag.groupBy("group").agg(F.max("lag").alias("m")).orderBy(F.desc("m"), "group").collect()
    top = [r["group"] for r in peaks[:TOP_GROUPS]]
    title = "Lag over time"
    if not top:
        return _empty(title, "no lag could be computed (no data-topic segments?)")
    (lo, hi, commits, peak), = lag.agg(F.min("timestamp"), F.max("timestamp"), F.count("*"), F.max("lag")).collect()
    if lo == hi:
        return _not_enough(title, ("one commit, at" if commits == 1 else f"{commits} commits, all at")
                           + f" {when(lo)}; the lag then was {_plural(peak, 'record')}")
    if peak == 0:
        return _not_enough(title, f"no lag at all: every one of the {commits} commits from {when(lo)} to "
                                  f"{when(hi)} was at the log end (0 records behind)")
    step = max((hi - lo) // LAG_BUCKETS, 1)
    pdf = (lag.where(F.col("group").isin(top))
           .withColumn("bucket", F.col("timestamp") - (F.col("timestamp") - lo) % step)
           .groupBy("group", "topic", "partition", "bucket").agg(F.max("lag").alias("lag")).toPandas())
    fig, ax = plt.subplots(figsize=(10, 4))
    for group in top:
        g = pdf[pdf["group"] == group]
        wide = g.pivot_table(index="bucket", columns=["topic", "partition"], values="lag").sort_index().ffill()
        total = wide.sum(axis=1)
        ax.step(pd.to_datetime(total.index, unit="ms"), total.values, where="post", label=group)
    ax.set_ylabel("total lag (records)")
    ax.set_ylim(bottom=0)
    _counts_from_zero(ax.yaxis)
    _time_axis(ax)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", title="group")
    ax.grid(alpha=0.3)
    return _chart(f"Lag over time, top {len(top)} of {len(peaks)} groups by peak lag", fig,
                  "Sum over the group's partitions of the lag at each commit (log end offset as of the "
                  "commit minus the committed offset), in records." + _top_note(len(top), len(peaks), "groups"))


CAUSE_NOTE = ("Cause from the coordinator's kcoord.rebalance.cause header, or inferred from consecutive "
              "generations when absent (a Kafka broker's store).")


def rebalances_per_hour(spark, out):
    rebalances = pipeline.read(spark, out, "rebalances")
    pdf = (rebalances.withColumn("hour", F.date_trunc("hour", "time"))
           .groupBy("hour", "cause").agg(F.count("*").alias("count"), F.min("timestamp").alias("first"))
           .toPandas())
    if pdf.empty:
        return _empty("Rebalances per hour", "no rebalances in range")
    total = int(pdf["count"].sum())
    if total < 2:
        row = pdf.iloc[0]
        return _not_enough("Rebalances", f"one rebalance ({row['cause']}) at {when(row['first'])}; "
                                         "it is listed under Latest rebalances below")
    if pdf["hour"].nunique() < 2:  # one bucket on a time axis says nothing: the causes, then
        by_cause = pdf.groupby("cause")["count"].sum().sort_values()
        fig, ax = plt.subplots(figsize=(10, 0.4 * len(by_cause) + 1.2))
        ax.barh(by_cause.index, by_cause.values)
        ax.set_xlabel("rebalances")
        _counts_from_zero(ax.xaxis)
        return _chart(f"Rebalances by cause, all {total} within the hour from "
                      f"{when(int(pdf['first'].min()) // 3_600_000 * 3_600_000)}", fig, CAUSE_NOTE)
    wide = pdf.pivot_table(index="hour", columns="cause", values="count", fill_value=0).sort_index()
    fig, ax = plt.subplots(figsize=(10, 3.5))
    bottom = None
    for cause in wide.columns:
        ax.bar(wide.index, wide[cause], width=1 / 24 * 0.9, align="edge", bottom=bottom, label=cause)
        bottom = wide[cause] if bottom is None else bottom + wide[cause]
    ax.set_ylabel("rebalances per hour")
    ax.set_ylim(0, wide.sum(axis=1).max() * 1.08)  # headroom: the tallest stack must not touch the frame
    _counts_from_zero(ax.yaxis)
    _time_axis(ax, "hour (UTC)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), title="cause")
    return _chart("Rebalances per hour, by cause", fig, CAUSE_NOTE)


def generation_durations(spark, out):
    pdf = (pipeline.read(spark, out, "generations").where(F.col("duration_ms").isNotNull())
           .select((F.col("duration_ms") / 1000).alias("s")).toPandas())
    if pdf.empty:
        return _empty("Generation duration", "no finished generation in range")
    if len(pdf) < 2:
        return _not_enough("Generation duration", f"one finished generation, which lasted {pdf['s'][0]:.1f} s")
    fig, ax = plt.subplots(figsize=(10, 3.5))
    ax.hist(pdf["s"].clip(lower=0.001), bins=40)
    ax.set_xlabel("seconds a generation lasted (until the group's next GroupMetadata record)")
    ax.set_ylabel("generations")
    _counts_from_zero(ax.yaxis)
    return _chart("Generation duration distribution", fig)


def health_chart(spark, out):
    health = pipeline.read(spark, out, "health_groups")
    total = health.count()
    pdf = health.orderBy(F.desc("totallag"), "group").limit(HEALTH_ROWS).toPandas()
    if pdf.empty:
        return _empty("Health", "no group with committed offsets"), pdf, total
    if not (pdf["totallag"] > 0).any():
        statuses = ", ".join(f"{g}: {s}" for g, s in zip(pdf["group"], pdf["status"], strict=True))
        return _not_enough("Health status per group", f"no group has any lag ({statuses})"), pdf, total
    fig, ax = plt.subplots(figsize=(10, 0.4 * len(pdf) + 1))
    ax.barh(pdf["group"], pdf["totallag"].clip(lower=0),
            color=[STATUS_COLOURS.get(s, "#757575") for s in pdf["status"]])
    for y, (s, lag) in enumerate(zip(pdf["status"], pdf["totallag"], strict=True)):
        ax.text(0, y, f" {s}  lag {lag}", va="center", fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, max(1, int(pdf["totallag"].max())) * 1.15)
    _counts_from_zero(ax.xaxis)
    ax.set_xlabel("total lag (records); colour: Burrow status")
    title = "Health status per group" + (f", top {len(pdf)} of {total} by total lag" if total > len(pdf) else "")
    return _chart(title, fig, "Burrow's rules, evaluated as of the time above."
                  + _top_note(len(pdf), total, "groups")), pdf, total


def _partitions(col):
    return F.aggregate(F.transform(F.coalesce(col, F.array()), lambda m: F.coalesce(F.size(m), F.lit(0))), F.lit(0), lambda a, b: a + b)


def consumer_groups(spark, out):
    """KIP-848 groups: their latest epoch, its members, target vs owned partitions and whether the members
    reconciled to it. Omitted when the store has no consumer group."""
    gens = pipeline.read(spark, out, "generations").where(F.col("group_type") == "consumer").drop("cause")
    causes = pipeline.read(spark, out, "rebalances").select("group", "generation", "log_offset", "cause")
    w = Window.partitionBy("group").orderBy(F.desc("log_partition"), F.desc("log_offset"))
    epochs = gens.where(~F.col("tombstone")).groupBy("group").agg(F.count("*").alias("epochs"))
    latest = (gens.withColumn("n", F.row_number().over(w)).where(F.col("n") == 1)
              .join(epochs, "group", "left").join(causes, ["group", "generation", "log_offset"], "left")
              .orderBy("group").limit(HEALTH_ROWS))
    total = gens.select("group").distinct().count()
    pdf = latest.select(
        "group", "tombstone", F.coalesce("epochs", F.lit(0)).alias("epochs"), F.col("generation").alias("epoch"),
        "member_count", F.coalesce("protocol", F.lit("(default)")).alias("assignor"), "cause",
        F.when(F.col("assignment_epoch").isNotNull(),
               _partitions(F.transform("members", lambda m: m["assignment"]))).alias("target"),
        _partitions(F.transform("members", lambda m: m["current_assignment"])).alias("owned"),
        _partitions(F.transform("members", lambda m: m["pending_revocation"])).alias("revoking"),
        "reconcile_ms").toPandas()
    if pdf.empty:
        return ""

    def state(row):
        if row["tombstone"]:
            return "deleted"
        if pd.isna(row["target"]):
            return "target not computed"
        return f"yes, in {int(row['reconcile_ms'])} ms" if not pd.isna(row["reconcile_ms"]) else "not yet"

    pdf["reconciled"] = pdf.apply(state, axis=1)
    for col in ("epoch", "member_count", "target"):
        pdf[col] = pdf[col].map(lambda v: "" if pd.isna(v) else str(int(v)))
    pdf = pdf.drop(columns=["tombstone", "reconcile_ms"]).rename(columns={
        "epoch": "group epoch", "member_count": "members", "cause": "last cause",
        "target": "target partitions", "owned": "owned at epoch end", "revoking": "pending revocation"})
    title = "Consumer groups (KIP-848), latest epoch" + (f", first {len(pdf)} of {total}" if total > len(pdf) else "")
    return _table(title, pdf) + ("<p>Group epochs are the generations of consumer groups. Target: the "
                                 "partitions the assignor gave the members at the epoch; owned: what they "
                                 "held when it ended; reconciled: every member held exactly its target.</p>")


def share_groups(spark, out):
    """Share groups (KIP-932), per share-partition: what their __share_group_state records say about
    deliveries (share_records.replay). Omitted when the store has none."""
    import os

    if not os.path.isdir(pipeline.table_dir(out, "share_deliveries")):
        return ""
    rows = pipeline.read(spark, out, "share_deliveries")
    total = rows.count()
    if total == 0:
        return ""
    pdf = (rows.orderBy(F.desc("deliveries"), "group", "topic_id", "partition").limit(HEALTH_ROWS)
           .select("group", "topic_id", "partition", "start_offset", "deliveries", "redeliveries", "completed",
                   "rejections", "releases_or_lock_expiries",
                   F.date_format("time", "yyyy-MM-dd HH:mm:ss").alias("last write (UTC)")).toPandas())
    pdf["start_offset"] = pdf["start_offset"].map(lambda v: "" if pd.isna(v) else str(int(v)))
    pdf = pdf.rename(columns={"topic_id": "topic id", "start_offset": "start offset",
                              "releases_or_lock_expiries": "released / lock expired"})
    title = "Share groups (KIP-932), per share-partition" + _top_note(len(pdf), total, "share-partitions")
    return _table(title, pdf) + ("<p>From the share coordinator's records: deliveries count each record's "
                                 "delivery count as last written (one more for a record the start offset passed); a redelivery is a "
                                 "delivery past the first; completed: acknowledged or archived; "
                                 "rejections are records archived (rejected, or past the delivery limit); "
                                 "released / lock expired counts records put back to available (a release, "
                                 "a closed session or an acquisition lock running out look alike there).</p>")


COORDINATOR = "org.apache.kafka.consumer.coordinator."
# KIP-714's consumer metrics that speak of a rebalance, as librdkafka and the Java consumer push them, and
# which of a generation's pushes to show: the largest windowed latency, the last total and partition count
REPORTED = {COORDINATOR + "rebalance.latency.max": ("max_value", "rebalance latency max (ms)"),
            COORDINATOR + "rebalance.latency.total": ("last_value", "rebalance latency total (ms)"),
            COORDINATOR + "assigned.partitions": ("last_value", "assigned partitions")}


def client_metrics_beside_rebalances(spark, out):
    """Per rebalance and member: the broker's recorded phases next to what the member itself pushed (KIP-714)
    during the generation the rebalance produced. Omitted when the store has no pushed client metrics."""
    import os

    if not os.path.isdir(pipeline.table_dir(out, "rebalance_client_metrics")):
        return ""
    rows = pipeline.read(spark, out, "rebalance_client_metrics").where(
        F.col("metric").isin(list(REPORTED)) & (F.size("attributes") == 0))
    chosen = F.coalesce(*[F.when(F.col("metric") == m, F.col(col)) for m, (col, _) in REPORTED.items()])
    keys = ["group", "generation", "log_partition", "log_offset", "consumer_id"]
    wide = rows.withColumn("shown", chosen).groupBy(
        *keys, "time", "rebalance_timestamp", "cause", "join_ms", "sync_ms", "reconcile_ms", "client_id",
    ).pivot("metric", list(REPORTED)).agg(F.first("shown")) \
        .join(rows.groupBy(*keys).agg(F.max("pushes").alias("pushes"),
                                      F.min("first_push_delay_ms").alias("first_push")), keys)
    total = wide.count()
    if total == 0:
        return ""
    labels = [label for _, label in REPORTED.values()]
    pdf = (wide.orderBy(F.desc("rebalance_timestamp"), "group", "client_id").limit(RECENT_REBALANCES)
           .select(F.date_format("time", "yyyy-MM-dd HH:mm:ss").alias("time (UTC)"), "group", "generation", "cause",
                   "join_ms", "sync_ms", "reconcile_ms", F.col("client_id").alias("member (client.id)"),
                   *[F.col(f"`{m}`").alias(label) for m, (_, label) in REPORTED.items()],
                   "pushes", F.col("first_push").alias("first push after (ms)")).toPandas())
    for col in ("join_ms", "sync_ms", "reconcile_ms", *labels):
        pdf[col] = pdf[col].map(lambda v: "" if pd.isna(v) else f"{v:g}")
    pdf = pdf.drop(columns=[c for c in ("join_ms", "sync_ms", "reconcile_ms") if (pdf[c] == "").all()])  # not this kind
    pdf = pdf.rename(columns={"join_ms": "join (ms)", "sync_ms": "sync (ms)", "reconcile_ms": "reconcile (ms)"})
    title = "Rebalances as their members saw them (KIP-714 client metrics)" + _top_note(
        len(pdf), total, "member rebalances")
    return _table(title, pdf) + (
        "<p>Join, sync and reconcile: the coordinator's recorded phases. The other columns: what the member's "
        "client pushed (org.apache.kafka.consumer.coordinator.*) from the rebalance's record to the group's "
        "next record: the largest rebalance latency max of those pushes (the client's own join and sync, "
        "until its application took the assignment), and the latency total and assigned partitions of the "
        "last one.</p>")


def build(spark, out) -> str:
    as_of = pipeline.read(spark, out, "health_groups").agg(F.max("as_of_ms")).collect()[0][0]
    as_of_text = when(as_of) if as_of else "n/a"
    health_html, health_pdf, groups = health_chart(spark, out)
    recent = (pipeline.read(spark, out, "rebalances").orderBy(F.desc("timestamp")).limit(RECENT_REBALANCES)
              .select(F.date_format("time", "yyyy-MM-dd HH:mm:ss").alias("time (UTC)"), "group", "generation",
                      "cause", "cause_source", F.col("members_joined_count").alias("joined"),
                      F.col("members_left_count").alias("left"), F.col("members_kept_count").alias("kept"),
                      F.col("partitions_moved").alias("moved"), "join_ms", "sync_ms", "reconcile_ms", "pause_ms")
              .toPandas())
    for col in ("join_ms", "sync_ms", "reconcile_ms", "pause_ms"):   # nullable longs come back as floats: "1226.0"
        recent[col] = recent[col].map(lambda v: "" if pd.isna(v) else str(int(v)))
    recent = recent.rename(columns={"join_ms": "join (ms)", "sync_ms": "sync (ms)", "reconcile_ms": "reconcile (ms)",
                                    "pause_ms": "pause (ms)"})
    counts = {name: pipeline.read(spark, out, name).count()
              for name in ("offset_commits", "generations", "rebalances")}
    parts = [
        health_html, lag_over_time(spark, out), rebalances_per_hour(spark, out),
        generation_durations(spark, out),
        _table("Groups (Burrow)" + (f", top {len(health_pdf)} of {groups} by total lag"
                                    if groups > len(health_pdf) else ""),
               health_pdf.drop(columns=["as_of", "as_of_ms", "maxlag_partition"], errors="ignore")
               .rename(columns={"totallag": "totallag (records)", "maxlag": "maxlag (records)"})),
        _table(f"Latest {len(recent)} of {counts['rebalances']} rebalances" if counts["rebalances"] > len(recent)
               else "Latest rebalances", recent),
        client_metrics_beside_rebalances(spark, out), consumer_groups(spark, out), share_groups(spark, out),
    ]
    summary = " · ".join(_plural(v, k.replace("_", " ").removesuffix("s")) for k, v in counts.items())
    return PAGE.format(when=html.escape(as_of_text), summary=html.escape(summary), body="\n".join(parts))


def write(spark, out) -> str:
    path = f"{out}/report.html"
    with open(path, "w", encoding="utf-8") as f:
        f.write(build(spark, out))
    return path


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kcoord consumer groups</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
section {{ margin-bottom: 2em; }} img {{ max-width: 100%; }}
table.t {{ border-collapse: collapse; font-size: 0.85em; }}
table.t td, table.t th {{ padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: right;
                          white-space: nowrap; }}
.none {{ color: #777; }}
</style></head><body>
<h1>Consumer groups: why they rebalanced, how far behind they are</h1>
<p>As of {when} · {summary}</p>
{body}
<script>/* lets a headless browser check every chart decoded */
addEventListener("load", () => {{ document.documentElement.dataset.chartsDecoded =
  [...document.images].filter(i => i.complete && i.naturalWidth > 0).length; }});</script>
</body></html>
"""
