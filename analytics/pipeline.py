"""ingest / health / report steps: segments -> Parquet tables -> Burrow health -> HTML.

Raw reads are decoded once and written; every derived table is computed from the written Parquet, so
the (costly) segment decoding is not repeated per table. With --since, the raw tables are first kept
whole up to --until in staging/: lag needs the log end before `since`, a rebalance its previous
generation; only the tables written at the end are cut at `since`.
"""
import os
import shutil

from pyspark.sql import functions as F

from kcoord.analytics import health, tables

RAW = ("offset_commits", "generations", "log_end_offsets")      # decoded from the segments
CLIENT_METRICS = ("client_metrics", "rebalance_client_metrics")  # from the broker's telemetry export, if any


def table_dir(out, name):
    return os.path.join(out, "tables", name)


def read(spark, out, name):
    return spark.read.parquet(table_dir(out, name))


def _write(df, out, name):
    df.write.mode("overwrite").parquet(table_dir(out, name))


def ingest(spark, log_dirs, out, scope: tables.Scope):
    context = tables.Scope(None, scope.until_ms, scope.group_filter)
    staged = scope.since_ms is not None
    home = os.path.join(out, "staging") if staged else out
    _write(tables.offset_commits(spark, log_dirs, context), home, "offset_commits")
    _write(tables.generations(spark, log_dirs, context), home, "generations")
    _write(tables.log_end_offsets(tables.data_batches(spark, log_dirs, context)), home, "log_end_offsets")
    _write(tables.share_deliveries(spark, log_dirs, scope), out, "share_deliveries")
    commits, gens = read(spark, home, "offset_commits"), read(spark, home, "generations")
    leo = read(spark, home, "log_end_offsets")
    since = tables.Scope(scope.since_ms)
    _write(since.rows(tables.generation_members(gens), group=False), out, "generation_members")
    _write(since.rows(tables.rebalances(gens, commits), group=False), out, "rebalances")
    _write(since.rows(tables.lag(commits, leo, gens), group=False), out, "lag")
    _client_metrics(spark, log_dirs, out, scope, gens)
    if staged:
        for name in RAW:
            _write(since.rows(read(spark, home, name), group=False), out, name)
        shutil.rmtree(home, ignore_errors=True)


def _client_metrics(spark, log_dirs, out, scope: tables.Scope, gens):
    """Pushed client metrics (KIP-714) and, per rebalance, its members' pushes during the generation it
    produced; neither table exists when the store holds no telemetry export (telemetry off)."""
    points = tables.client_metrics(spark, log_dirs, tables.Scope(scope.since_ms, scope.until_ms))
    for name in CLIENT_METRICS:
        shutil.rmtree(table_dir(out, name), ignore_errors=True)   # a previous run's, over another store
    if points is None:
        return
    _write(points, out, "client_metrics")
    _write(tables.rebalance_client_metrics(read(spark, out, "rebalances"), gens, read(spark, out, "client_metrics")),
           out, "rebalance_client_metrics")


def latest_time(spark, out) -> int | None:
    (a,), (b,) = (read(spark, out, "offset_commits").agg(F.max("timestamp")).collect(),
                  read(spark, out, "log_end_offsets").agg(F.max("timestamp")).collect())
    times = [t for t in (a[0], b[0]) if t is not None]
    return max(times) if times else None


def evaluate_health(spark, out, as_of_ms=None):
    """Burrow's statuses as of `as_of_ms` (default: the latest time in the store). Returns it."""
    if as_of_ms is None:
        as_of_ms = latest_time(spark, out) or 0
    parts = health.partitions(read(spark, out, "lag"), read(spark, out, "offset_commits"),
                              read(spark, out, "log_end_offsets"), as_of_ms)
    _write(parts, out, "health")
    _write(health.groups(read(spark, out, "health")), out, "health_groups")
    return as_of_ms
