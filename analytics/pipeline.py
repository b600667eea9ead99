"""ingest / health / report steps: segments -> Parquet tables -> Burrow health -> HTML.

Raw reads are decoded once and written; every derived table is computed from the written Parquet, so
the (costly) segment decoding is not repeated per table.
"""
import os

from pyspark.sql import functions as F

from analytics import health, tables

RAW = ("offset_commits", "generations", "log_end_offsets")
DERIVED = ("generation_members", "rebalances", "lag")
HEALTH = ("health", "health_groups")
TABLES = RAW + DERIVED + HEALTH


def table_dir(out, name):
    return os.path.join(out, "tables", name)


def read(spark, out, name):
    return spark.read.parquet(table_dir(out, name))


def _write(df, out, name):
    df.write.mode("overwrite").parquet(table_dir(out, name))


def ingest(spark, log_dirs, out, scope: tables.Scope):
    _write(tables.offset_commits(spark, log_dirs, scope), out, "offset_commits")
    _write(tables.generations(spark, log_dirs, scope), out, "generations")
    _write(tables.log_end_offsets(tables.data_batches(spark, log_dirs, scope)), out, "log_end_offsets")
    commits, gens = read(spark, out, "offset_commits"), read(spark, out, "generations")
    leo = read(spark, out, "log_end_offsets")
    _write(tables.generation_members(gens), out, "generation_members")
    _write(tables.rebalances(gens, commits), out, "rebalances")
    _write(tables.lag(commits, leo, gens), out, "lag")


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
