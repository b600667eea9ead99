"""Burrow's evaluation on Spark: each partition's window of commits as of a time, judged by burrow.py."""
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from kcoord.analytics import burrow

KEYS = ["group", "topic", "partition"]


def _status(offsets, timestamps, lags, current_lag, now_ms, heads):
    w = burrow.Window(list(offsets), list(timestamps), list(lags))
    return burrow.partition_status(w, current_lag, now_ms, list(heads or ()))


def partitions(lag: DataFrame, commits: DataFrame, leo: DataFrame, as_of_ms: int,
               intervals=burrow.INTERVALS, refresh_ms=burrow.OFFSET_REFRESH_MS) -> DataFrame:
    """Per group/topic/partition with a live committed offset at `as_of_ms`: Burrow's status."""
    by_log = Window.partitionBy(*KEYS).orderBy(F.col("log_partition").desc(), F.col("log_offset").desc())
    live = commits.where(F.col("timestamp") <= as_of_ms) \
        .withColumn("rn", F.row_number().over(by_log)).where((F.col("rn") == 1) & ~F.col("tombstone")) \
        .select(*KEYS)
    recent = lag.where(F.col("timestamp") <= as_of_ms).join(live, KEYS) \
        .withColumn("rn", F.row_number().over(by_log)).where(F.col("rn") <= intervals)
    entry = F.struct("log_partition", "log_offset", "current_offset", "timestamp", "lag")
    windows = recent.groupBy(*KEYS).agg(
        F.sort_array(F.collect_list(entry)).alias("w"),
        F.max_by(F.struct("consumer_id", "host", "client_id"), F.col("log_offset")).alias("owner"))

    leo_now = leo.where(F.col("timestamp") <= as_of_ms).groupBy("topic", "partition") \
        .agg(F.max("log_end_offset").alias("log_end_offset"))
    since = as_of_ms - intervals * refresh_ms
    in_window = leo.where((F.col("timestamp") > since) & (F.col("timestamp") <= as_of_ms)) \
        .groupBy("topic", "partition").agg(F.collect_list("log_end_offset").alias("heads_in"))
    at_start = leo.where(F.col("timestamp") <= since).groupBy("topic", "partition") \
        .agg(F.max("log_end_offset").alias("head_at_start"))

    status = F.udf(_status, StringType(), useArrow=True)
    j = windows.join(leo_now, ["topic", "partition"], "left") \
        .join(in_window, ["topic", "partition"], "left").join(at_start, ["topic", "partition"], "left")
    last = F.element_at("w", -1)
    first = F.element_at("w", 1)
    heads = F.concat(F.coalesce("heads_in", F.array().cast("array<bigint>")),
                     F.when(F.col("head_at_start").isNotNull(), F.array("head_at_start"))
                     .otherwise(F.array().cast("array<bigint>")))
    j = j.withColumn("current_lag", F.greatest(F.col("log_end_offset") - last["current_offset"], F.lit(0)))
    return j.select(
        F.lit(as_of_ms).alias("as_of_ms"), F.timestamp_millis(F.lit(as_of_ms)).alias("as_of"), *KEYS,
        status(F.col("w.current_offset"), F.col("w.timestamp"), F.col("w.lag"), F.col("current_lag"),
               F.lit(as_of_ms), heads).alias("status"),
        "current_lag", "log_end_offset",
        first["current_offset"].alias("start_offset"), first["timestamp"].alias("start_timestamp"),
        first["lag"].alias("start_lag"),
        last["current_offset"].alias("current_offset"), last["timestamp"].alias("end_timestamp"),
        last["lag"].alias("end_lag"),
        F.size("w").alias("window_commits"), (F.size("w") >= intervals).alias("complete"),
        F.col("owner.consumer_id").alias("consumer_id"), F.col("owner.host").alias("host"),
        F.col("owner.client_id").alias("client_id"),
    )


def groups(parts: DataFrame) -> DataFrame:
    """Per group: the worst partition status (STOP/STALL/REWIND -> ERR), Burrow's complete/maxlag/totallag."""
    code = F.create_map(*[F.lit(x) for kv in burrow.CODES.items() for x in kv])
    as_group = F.when(F.col("status").isin(burrow.STOP, burrow.STALL, burrow.REWIND), burrow.ERR) \
        .otherwise(F.col("status"))
    worst = F.max_by(as_group, code[as_group])
    return parts.groupBy("as_of_ms", "as_of", "group").agg(
        worst.alias("status"),
        F.count("*").alias("partition_count"),
        F.avg(F.col("complete").cast("double")).alias("complete"),
        F.sum("current_lag").alias("totallag"),
        F.max("current_lag").alias("maxlag"),
        F.max_by(F.struct("topic", "partition"), "current_lag").alias("maxlag_partition"),
        F.sum((F.col("status") != burrow.OK).cast("int")).alias("partitions_not_ok"),
    )
