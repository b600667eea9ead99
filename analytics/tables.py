"""The pipeline's tables, as Spark DataFrames built from the three raw reads of source.py.

Column names follow what Kafka users know: kafka-consumer-groups --describe (group, topic, partition,
current_offset, log_end_offset, lag, consumer_id, host, client_id) and Burrow's status names.
Times are epoch milliseconds (`*_ms` or `timestamp`) plus a `time` timestamp column for humans.
"""
from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from kcoord.analytics import client_metrics as client_metrics_logic
from kcoord.analytics import consumer_epochs, share_records, source

HEADER = "kcoord.rebalance."
STRING_ARRAY = "array<string>"


@dataclass
class Scope:
    """What the user asked for: time range (ms, inclusive) and a group regex."""
    since_ms: int | None = None
    until_ms: int | None = None
    group_filter: str | None = None

    def rows(self, df: DataFrame, time_col="timestamp", group=True) -> DataFrame:
        if self.since_ms is not None:
            df = df.where(F.col(time_col) >= self.since_ms)
        if self.until_ms is not None:
            df = df.where(F.col(time_col) <= self.until_ms)
        if group and self.group_filter:
            df = df.where(F.col("group").rlike(self.group_filter))
        return df


def _time(col):
    return F.timestamp_millis(F.col(col))


def offset_commits(spark, log_dirs, scope: Scope) -> DataFrame:
    return scope.rows(source.commits(spark, log_dirs)).withColumn("time", _time("timestamp"))


def data_batches(spark, log_dirs, scope: Scope) -> DataFrame:
    return scope.rows(source.data_batches(spark, log_dirs), "max_timestamp", group=False)


def _by_group_log_order():
    return Window.partitionBy("group").orderBy("log_partition", "log_offset")


def _classic_generations(spark, log_dirs, scope: Scope) -> DataFrame:
    raw = scope.rows(source.groups(spark, log_dirs))
    h = F.col("headers")
    return raw.select(
        "group", "generation", "protocol_type", "protocol", "leader", "state_timestamp", "tombstone",
        "timestamp", "log_partition", "log_offset", "members",
        h[HEADER + "cause"].alias("cause"), h[HEADER + "reason"].alias("reason"),
        h[HEADER + "trigger_member"].alias("trigger_member"),
        h[HEADER + "start_ms"].cast("long").alias("rebalance_start_ms"),
        h[HEADER + "join_ms"].cast("long").alias("join_ms"),
        h[HEADER + "sync_ms"].cast("long").alias("sync_ms"), F.lit("classic").alias("group_type"),
    )


def consumer_generations(spark, log_dirs, scope: Scope) -> DataFrame:
    """KIP-848 groups: their records replayed per group (consumer_epochs), one row per group epoch."""
    from pyspark.sql.pandas.types import from_arrow_schema

    raw = scope.rows(source.consumer_groups(spark, log_dirs))
    return raw.groupBy("group").applyInArrow(consumer_epochs.replay_table, from_arrow_schema(
        consumer_epochs.SCHEMA)).withColumn("group_type", F.lit("consumer"))


def generations(spark, log_dirs, scope: Scope) -> DataFrame:
    """One row per GroupMetadata record (a classic group's completed generation, Empty group, or
    tombstone) and per consumer group epoch (or its tombstone); group_type says which ("classic" or
    "consumer", as ListGroups names them; a classic group's protocol_type is "consumer" too)."""
    both = _classic_generations(spark, log_dirs, scope).unionByName(
        consumer_generations(spark, log_dirs, scope), allowMissingColumns=True)
    w = _by_group_log_order()
    size = F.coalesce(F.size("members"), F.lit(0))
    return both.select(
        "group", "group_type", "generation", "protocol_type", "protocol", "leader", "state_timestamp",
        size.alias("member_count"), (~F.col("tombstone") & (size == 0)).alias("is_empty"),
        "tombstone", "timestamp", _time("timestamp").alias("time"), "log_partition", "log_offset",
        F.transform("members", lambda m: m["member_id"]).alias("member_ids"),
        "cause", "reason", "trigger_member", "rebalance_start_ms", "join_ms", "sync_ms", "members",
        "inferred_cause", "cause_detail", "assignment_epoch", "reconciled_timestamp",
        (F.col("reconciled_timestamp") - F.col("timestamp")).alias("reconcile_ms"),
    ).withColumn("next_timestamp", F.lead("timestamp").over(w)) \
     .withColumn("duration_ms", F.col("next_timestamp") - F.col("timestamp"))


def share_deliveries(spark, log_dirs, scope: Scope) -> DataFrame:
    """Share groups (KIP-932): one row per share-partition (group, topic, partition) from its
    `__share_group_state` records replayed in log order (share_records.replay): deliveries, redeliveries,
    acknowledged, rejections and releases-or-lock-expiries."""
    from pyspark.sql.pandas.types import from_arrow_schema

    raw = scope.rows(source.share_state(spark, log_dirs))
    return raw.groupBy("group", "topic_id", "partition").applyInArrow(
        share_records.replay_table, from_arrow_schema(share_records.STATS_SCHEMA)) \
        .withColumn("time", _time("last_timestamp"))


def generation_members(gens: DataFrame) -> DataFrame:
    m = F.col("m")
    return gens.where(~F.col("tombstone")).select(
        "group", "generation", "timestamp", "log_partition", "log_offset",
        F.explode("members").alias("m"), "leader", "group_type",
    ).select(
        "group", "generation", "timestamp", "log_partition", "log_offset",
        m["member_id"].alias("consumer_id"), m["group_instance_id"].alias("group_instance_id"),
        m["client_id"].alias("client_id"), m["client_host"].alias("host"),
        m["rebalance_timeout_ms"].alias("rebalance_timeout_ms"),
        m["session_timeout_ms"].alias("session_timeout_ms"),
        m["subscribed_topics"].alias("subscribed_topics"), m["assignment"].alias("assignment"),
        F.coalesce(F.size(m["assignment"]), F.lit(0)).alias("assigned_partitions"),
        (m["member_id"] == F.col("leader")).alias("is_leader"),
        "group_type", m["subscribed_topic_regex"].alias("subscribed_topic_regex"),
        m["server_assignor"].alias("server_assignor"), m["member_epoch"].alias("member_epoch"),
        m["current_assignment"].alias("current_assignment"), m["pending_revocation"].alias("pending_revocation"),
    )


def _owned(members_col):
    """[(topic, partition, owner)] for every assigned partition of a members array."""
    pairs = F.transform(members_col, lambda m: F.transform(
        F.coalesce(m["assignment"], F.array().cast("array<struct<topic:string,partition:int>>")),
        lambda tp: F.struct(tp["topic"].alias("topic"), tp["partition"].alias("partition"),
                            m["member_id"].alias("owner"))))
    return F.flatten(F.coalesce(pairs, F.array()))


def _inferred_cause():
    """What consecutive GroupMetadata values say when the record has no cause header (real Kafka); a
    consumer group's epoch carries its own (consumer_epochs)."""
    return F.coalesce(F.col("inferred_cause"), _inferred_classic_cause())


def _inferred_classic_cause():
    return (F.when(F.col("prev_generation").isNull(), "initial_join")
            .when(F.col("generation") == F.col("prev_generation"), "static_member_update")
            .when(F.size("members_joined") > 0, "member_joined")
            .when(F.size("members_left") > 0, "member_left")
            .otherwise("metadata_changed"))


def rebalances(gens: DataFrame, commits: DataFrame) -> DataFrame:
    """One row per completed rebalance: membership and assignment diff, cause, phase durations and the
    consumption pause (the group's commit gap around it)."""
    w = _by_group_log_order()
    ordered = gens.withColumn("prev_tombstone", F.lag("tombstone").over(w)) \
        .withColumn("prev_members", F.lag("members").over(w)) \
        .withColumn("prev_generation", F.when(~F.coalesce(F.col("prev_tombstone"), F.lit(True)),
                                              F.lag("generation").over(w))) \
        .withColumn("prev_timestamp", F.lag("timestamp").over(w)) \
        .where(~F.col("tombstone"))
    prev_ids = F.when(F.col("prev_generation").isNotNull(),
                      F.transform("prev_members", lambda m: m["member_id"])).otherwise(F.array().cast(STRING_ARRAY))
    ids = F.coalesce(F.col("member_ids"), F.array().cast(STRING_ARRAY))
    prev_owned = F.when(F.col("prev_generation").isNotNull(), _owned(F.col("prev_members")))
    prev_owned = F.coalesce(prev_owned, F.array().cast("array<struct<topic:string,partition:int,owner:string>>"))
    cur_owned = _owned(F.col("members"))
    changed = F.array_union(F.array_except(cur_owned, prev_owned), F.array_except(prev_owned, cur_owned))
    r = ordered.select(
        "group", "generation", "prev_generation", "timestamp", "time", "log_partition", "log_offset",
        "protocol", "leader", "member_count", "is_empty",
        F.array_except(ids, prev_ids).alias("members_joined"),
        F.array_except(prev_ids, ids).alias("members_left"),
        F.array_intersect(ids, prev_ids).alias("members_kept"),
        F.size(F.array_distinct(F.transform(changed, lambda x: F.struct(x["topic"], x["partition"]))))
        .alias("partitions_moved"),
        "cause", "reason", "trigger_member", "rebalance_start_ms", "join_ms", "sync_ms",
        (F.col("timestamp") - F.col("prev_timestamp")).alias("previous_generation_ms"),
        "group_type", "inferred_cause", "cause_detail", "assignment_epoch", "reconcile_ms",
    )
    r = r.withColumn("cause_source", F.when(F.col("cause").isNotNull(), "header").otherwise("inferred")) \
        .withColumn("inferred_cause", _inferred_cause()) \
        .withColumn("cause", F.coalesce(F.col("cause"), F.col("inferred_cause"))) \
        .withColumn("rebalance_ms", F.coalesce(F.col("join_ms") + F.col("sync_ms"), F.col("reconcile_ms"))) \
        .withColumn("members_joined_count", F.size("members_joined")) \
        .withColumn("members_left_count", F.size("members_left")) \
        .withColumn("members_kept_count", F.size("members_kept"))
    return _with_commit_gap(r, commits)


def _with_commit_gap(r: DataFrame, commits: DataFrame) -> DataFrame:
    """pause_ms: from the group's last commit before the rebalance began to its first commit after
    the new generation was stored - how long consumption (as seen through commits) stopped."""
    times = commits.where(~F.col("tombstone")).select("group", F.col("commit_timestamp").alias("t")) \
        .distinct().withColumn("kind", F.lit(1))
    began = F.coalesce(F.col("rebalance_start_ms"), F.col("timestamp"))
    events = r.select("group", "log_partition", "log_offset", began.alias("began"), F.col("timestamp").alias("done"))
    before = events.select("group", "log_partition", "log_offset", F.col("began").alias("t"), F.lit(0).alias("kind"))
    after = events.select("group", "log_partition", "log_offset", F.col("done").alias("t"), F.lit(2).alias("kind"))
    cols = ["group", "log_partition", "log_offset", "t", "kind"]
    commit_rows = times.select("group", F.lit(None).cast("int").alias("log_partition"),
                               F.lit(None).cast("long").alias("log_offset"), "t", "kind")
    u = before.select(cols).unionByName(after.select(cols)).unionByName(commit_rows)
    w = Window.partitionBy("group").orderBy("t", "kind")
    commit_t = F.when(F.col("kind") == 1, F.col("t"))
    u = u.withColumn("last_commit", F.last(commit_t, ignorenulls=True).over(
        w.rowsBetween(Window.unboundedPreceding, -1))) \
        .withColumn("next_commit", F.first(commit_t, ignorenulls=True).over(
            w.rowsBetween(1, Window.unboundedFollowing)))
    b = u.where(F.col("kind") == 0).select("group", "log_partition", "log_offset", "last_commit")
    a = u.where(F.col("kind") == 2).select("group", "log_partition", "log_offset", "next_commit")
    keys = ["group", "log_partition", "log_offset"]
    out = r.join(b, keys, "left").join(a, keys, "left")
    return out.withColumn("pause_ms", F.when(~F.col("is_empty"), F.col("next_commit") - F.col("last_commit"))) \
        .withColumnRenamed("last_commit", "last_commit_before_ms") \
        .withColumnRenamed("next_commit", "first_commit_after_ms")


def log_end_offsets(batches: DataFrame) -> DataFrame:
    """(topic, partition, timestamp, log_end_offset): each batch moves the log end to last_offset + 1."""
    return batches.select("topic", "partition", F.col("max_timestamp").alias("timestamp"),
                          (F.col("last_offset") + 1).alias("log_end_offset"))


def lag(commits: DataFrame, leo: DataFrame, gens: DataFrame) -> DataFrame:
    """Lag at every commit: the log end offset as of the commit time (as-of join: the largest end
    offset of batches with max_timestamp <= commit time) minus the committed offset, floored at 0;
    with the owner (CONSUMER-ID HOST CLIENT-ID) from the generation in effect (log order)."""
    c = commits.where(~F.col("tombstone")).select(
        "group", "topic", "partition", F.col("commit_timestamp").alias("timestamp"), "current_offset",
        "log_partition", "log_offset")
    heads = leo.select("topic", "partition", "timestamp", "log_end_offset", F.lit(0).alias("kind"))
    rows = c.withColumn("kind", F.lit(1)).withColumn("log_end_offset", F.lit(None).cast("long"))
    u = rows.unionByName(heads, allowMissingColumns=True)
    w = Window.partitionBy("topic", "partition").orderBy("timestamp", "kind") \
        .rowsBetween(Window.unboundedPreceding, 0)
    u = u.withColumn("log_end_offset", F.max("log_end_offset").over(w)).where(F.col("kind") == 1)
    lagged = u.withColumn("lag", F.greatest(F.col("log_end_offset") - F.col("current_offset"), F.lit(0)))
    return _with_owner(lagged.drop("kind"), gens).withColumn("time", _time("timestamp"))


def _with_owner(rows: DataFrame, gens: DataFrame) -> DataFrame:
    g = gens.where(~F.col("tombstone")).select(
        "group", "log_partition", F.col("log_offset").alias("gen_log_offset"), "generation", "members")
    marks = g.select("group", "log_partition", F.col("gen_log_offset").alias("log_offset"),
                     F.col("gen_log_offset").alias("gen_mark"))
    keyed = rows.withColumn("gen_mark", F.lit(None).cast("long"))
    u = keyed.unionByName(marks, allowMissingColumns=True)
    w = Window.partitionBy("group", "log_partition").orderBy("log_offset", F.col("gen_mark").isNull()) \
        .rowsBetween(Window.unboundedPreceding, 0)
    u = u.withColumn("gen_log_offset", F.last("gen_mark", ignorenulls=True).over(w)) \
        .where(F.col("gen_mark").isNull()).drop("gen_mark")
    owners = g.select("group", "log_partition", "gen_log_offset", "generation",
                      F.explode(_owned(F.col("members"))).alias("o"), "members") \
        .select("group", "log_partition", "gen_log_offset", "generation",
                F.col("o.topic").alias("topic"), F.col("o.partition").alias("partition"),
                F.col("o.owner").alias("consumer_id"),
                F.filter("members", lambda m: m["member_id"] == F.col("o.owner"))[0].alias("m"))
    owners = owners.select("group", "log_partition", "gen_log_offset", "generation", "topic", "partition",
                           "consumer_id", F.col("m.client_host").alias("host"),
                           F.col("m.client_id").alias("client_id"))
    gen_of = g.select("group", "log_partition", "gen_log_offset", F.col("generation").alias("gen"))
    out = u.join(owners, ["group", "log_partition", "gen_log_offset", "topic", "partition"], "left") \
        .drop("generation").join(gen_of, ["group", "log_partition", "gen_log_offset"], "left") \
        .withColumnRenamed("gen", "generation")
    return out.drop("gen_log_offset")


# --- pushed client metrics (KIP-714), from the broker's telemetry export (client_metrics.py) -------------------
PUSH_SCHEMA = ("timestamp long, client_instance_id string, client_id string, client_software_name string, "
               "client_software_version string, client_source_address string, client_source_port int, "
               "subscription_id int, push_interval_ms long, terminating boolean, resource map<string,string>, "
               "points array<struct<name:string,kind:string,value:double,count:long,unit:string,monotonic:boolean,"
               "time_unix_nano:long,attributes:map<string,string>>>")


def _resource(names):
    values = [F.col("resource")[n] for n in names]
    first = F.coalesce(*values) if len(values) > 1 else values[0]
    return F.when(first != "", first)


def client_metrics(spark, log_dirs, scope: Scope) -> DataFrame | None:
    """One row per data point of every push the broker exported; None when it exported none (telemetry off).
    A line torn by a crash is dropped (DROPMALFORMED)."""
    files = client_metrics_logic.export_files(log_dirs)
    if not files:
        return None
    raw = scope.rows(spark.read.schema(PUSH_SCHEMA).option("mode", "DROPMALFORMED").json(files), group=False)
    p = F.col("p")
    return raw.where(F.col("client_instance_id").isNotNull()).select(
        "timestamp", _time("timestamp").alias("time"), "client_instance_id", "client_id", "client_software_name",
        "client_software_version", F.col("client_source_address").alias("host"),
        _resource(client_metrics_logic.GROUP_ID_ATTRIBUTES).alias("group_id"),
        _resource(client_metrics_logic.MEMBER_ID_ATTRIBUTES).alias("member_id"), "terminating", "push_interval_ms",
        "resource", F.explode("points").alias("p"),
    ).select("*", p["name"].alias("metric"), p["kind"].alias("kind"), p["value"].alias("value"),
             p["count"].alias("count"), p["unit"].alias("unit"), p["attributes"].alias("attributes"),
             p["time_unix_nano"].alias("time_unix_nano")).drop("p")


def rebalance_client_metrics(rebalances: DataFrame, gens: DataFrame, points: DataFrame) -> DataFrame:
    """Per rebalance, member of the generation it produced and pushed metric: the member's pushes from the
    rebalance's record to the group's next one (client_metrics.beside_rebalances: first, last and largest
    value), with the rebalance's recorded phases. A push is offered to the group it names (librdkafka's
    group_id resource attribute), else to every group that had a member with its client.id and host."""
    from pyspark.sql.pandas.types import from_arrow_schema

    keys = ["group", "log_partition", "log_offset"]
    slim = F.transform("members", lambda m: F.struct(m["member_id"].alias("member_id"),
                                                       m["client_id"].alias("client_id"),
                                                       m["client_host"].alias("client_host")))
    r = rebalances.select(*keys, "generation", "timestamp").join(
        gens.select(*keys, "next_timestamp", slim.alias("members")), keys)
    hosts = generation_members(gens).select("group", "client_id", "host").distinct() \
        .withColumn("host", F.regexp_replace("host", "^/", ""))
    cols = list(client_metrics_logic.POINT_COLUMNS)
    named = points.where(F.col("group_id").isNotNull()).select(F.col("group_id").alias("group"), *cols)
    unnamed = points.where(F.col("group_id").isNull()).join(hosts, ["client_id", "host"]).select("group", *cols)
    candidates = named.unionByName(unnamed)
    phases = rebalances.select(*keys, "cause", "join_ms", "sync_ms", "reconcile_ms", "rebalance_ms")
    out = r.groupBy("group").cogroup(candidates.groupBy("group")).applyInArrow(
        client_metrics_logic.beside_rebalances_table, from_arrow_schema(client_metrics_logic.SCHEMA))
    return out.join(phases, keys, "left").withColumn("time", _time("rebalance_timestamp"))
