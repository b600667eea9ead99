"""A self-contained HTML report (no external JS/CSS: charts are matplotlib PNGs inlined as base64).

Aggregation runs on Spark; only small, already-aggregated frames reach pandas and matplotlib.
"""
import base64
import datetime as dt
import html
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from analytics import pipeline  # noqa: E402

TOP_GROUPS = 5
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


def _table(title, df: pd.DataFrame):
    if df.empty:
        return _empty(title, "nothing to show")
    body = df.to_html(index=False, escape=True, border=0, classes="t", na_rep="")
    return f"<section><h2>{html.escape(title)}</h2>{body}</section>"


def lag_over_time(spark, out):
    lag = pipeline.read(spark, out, "lag").where(F.col("lag").isNotNull())
    top = [r["group"] for r in lag.groupBy("group").agg(F.max("lag").alias("m"))
           .orderBy(F.desc("m"), "group").limit(TOP_GROUPS).collect()]
    if not top:
        return _empty("Lag over time", "no lag could be computed (no data-topic segments?)")
    (lo, hi), = lag.agg(F.min("timestamp"), F.max("timestamp")).collect()
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
    ax.legend(loc="upper left", fontsize="small")
    ax.grid(alpha=0.3)
    return _chart(f"Lag over time, top {len(top)} groups", fig,
                  "Sum over the group's partitions of the lag at each commit (log end offset as of the "
                  "commit minus the committed offset).")


def rebalances_per_hour(spark, out):
    pdf = (pipeline.read(spark, out, "rebalances")
           .withColumn("hour", F.date_trunc("hour", "time"))
           .groupBy("hour", "cause").count().toPandas())
    if pdf.empty:
        return _empty("Rebalances per hour", "no rebalances in range")
    wide = pdf.pivot_table(index="hour", columns="cause", values="count", fill_value=0).sort_index()
    fig, ax = plt.subplots(figsize=(10, 3.5))
    bottom = None
    for cause in wide.columns:
        ax.bar(wide.index, wide[cause], width=1 / 24 * 0.9, bottom=bottom, label=cause)
        bottom = wide[cause] if bottom is None else bottom + wide[cause]
    ax.set_ylabel("rebalances")
    ax.legend(fontsize="small", ncol=3)
    return _chart("Rebalances per hour, by cause", fig,
                  "Cause from the coordinator's kcoord.rebalance.cause header, or inferred from "
                  "consecutive generations when absent (a Kafka broker's store).")


def generation_durations(spark, out):
    pdf = (pipeline.read(spark, out, "generations").where(F.col("duration_ms").isNotNull())
           .select((F.col("duration_ms") / 1000).alias("s")).toPandas())
    if pdf.empty:
        return _empty("Generation duration", "no finished generation in range")
    fig, ax = plt.subplots(figsize=(10, 3.5))
    ax.hist(pdf["s"].clip(lower=0.001), bins=40)
    ax.set_xlabel("seconds a generation lasted (until the group's next GroupMetadata record)")
    ax.set_ylabel("generations")
    return _chart("Generation duration distribution", fig)


def health_chart(spark, out):
    pdf = pipeline.read(spark, out, "health_groups").orderBy(F.desc("totallag"), "group").limit(30).toPandas()
    if pdf.empty:
        return _empty("Health", "no group with committed offsets"), pdf
    fig, ax = plt.subplots(figsize=(10, 0.4 * len(pdf) + 1))
    ax.barh(pdf["group"], pdf["totallag"].clip(lower=0),
            color=[STATUS_COLOURS.get(s, "#757575") for s in pdf["status"]])
    for y, (s, lag) in enumerate(zip(pdf["status"], pdf["totallag"], strict=True)):
        ax.text(0, y, f" {s}  lag {lag}", va="center", fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("total lag (records); colour: Burrow status")
    return _chart("Health status per group", fig, "Burrow's rules, evaluated as of the time above."), pdf


def build(spark, out) -> str:
    as_of = pipeline.read(spark, out, "health_groups").agg(F.max("as_of_ms")).collect()[0][0]
    when = dt.datetime.fromtimestamp(as_of / 1000, dt.UTC).isoformat() if as_of else "n/a"
    health_html, health_pdf = health_chart(spark, out)
    recent = (pipeline.read(spark, out, "rebalances").orderBy(F.desc("timestamp")).limit(25)
              .select(F.date_format("time", "yyyy-MM-dd HH:mm:ss").alias("time"), "group", "generation",
                      "cause", "cause_source", F.col("members_joined_count").alias("joined"),
                      F.col("members_left_count").alias("left"), F.col("members_kept_count").alias("kept"),
                      F.col("partitions_moved").alias("moved"), "join_ms", "sync_ms", "pause_ms").toPandas())
    for col in ("join_ms", "sync_ms", "pause_ms"):       # nullable longs come back as floats: "1226.0"
        recent[col] = recent[col].map(lambda v: "" if pd.isna(v) else str(int(v)))
    counts = {name: pipeline.read(spark, out, name).count()
              for name in ("offset_commits", "generations", "rebalances")}
    parts = [
        health_html, lag_over_time(spark, out), rebalances_per_hour(spark, out),
        generation_durations(spark, out),
        _table("Groups (Burrow)", health_pdf.drop(columns=["as_of", "maxlag_partition"], errors="ignore")),
        _table("Latest rebalances", recent),
    ]
    summary = " · ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items())
    return PAGE.format(when=html.escape(when), summary=html.escape(summary), body="\n".join(parts))


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
