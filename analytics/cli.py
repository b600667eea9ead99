"""`python -m kcoord.analytics ingest|report|health|all --log-dirs DIR [--out DIR] [--since/--until ISO or ms]
[--group-filter REGEX] [--master local[*]]` - also what `kcoord analyze ...` runs."""
import argparse
import datetime as dt
import os
import sys

from kcoord.analytics import layout

COMMANDS = ("ingest", "report", "health", "all")


def parse_time(text: str) -> int:
    """Epoch milliseconds, or an ISO 8601 time (UTC unless it says otherwise)."""
    if text.lstrip("-").isdigit():
        return int(text)
    t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)


def parser():
    p = argparse.ArgumentParser(prog="python -m kcoord.analytics", description=__doc__.split("\n")[0])
    p.add_argument("command", choices=COMMANDS)
    p.add_argument("--log-dirs", action="append", default=[],
                   help="Kafka-style log dir(s), comma-separated or repeated (the broker's log.dirs)")
    p.add_argument("--out", default="analytics-out", help="where tables/ and report.html go")
    p.add_argument("--since", type=parse_time, help="ISO 8601 time or epoch ms (inclusive)")
    p.add_argument("--until", type=parse_time,
                   help="ISO 8601 time or epoch ms (inclusive); health is evaluated as of this time")
    p.add_argument("--group-filter", help="regular expression a group id must match")
    p.add_argument("--master", default="local[*]", help="Spark master (ignored under spark-submit)")
    p.add_argument("--driver-memory", default=None, help="e.g. 4g (local runs; the default heap is 1g)")
    return p


def main(argv=None, under_spark_submit=False, spark=None) -> int:
    """`spark`: run in an existing session (left running); otherwise one is created and stopped."""
    args = parser().parse_args(argv)
    from kcoord.analytics import pipeline, report, session, tables

    needs_logs = args.command in ("ingest", "all") or not os.path.isdir(pipeline.table_dir(args.out, "lag"))
    if needs_logs and not layout.list_segments(args.log_dirs):
        print(f"no segments found under --log-dirs {args.log_dirs!r}", file=sys.stderr)
        return 2
    conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else {}
    owned = spark is None
    if owned:
        spark = session.get_or_create(None if under_spark_submit else args.master, conf=conf)
    scope = tables.Scope(args.since, args.until, args.group_filter)
    if needs_logs:
        pipeline.ingest(spark, args.log_dirs, args.out, scope)
        print(f"tables written under {os.path.join(args.out, 'tables')}")
    if args.command in ("health", "all") or not os.path.isdir(pipeline.table_dir(args.out, "health")):
        as_of = pipeline.evaluate_health(spark, args.out, args.until)
        if args.command == "health":
            print_health(spark, args.out, as_of)
    if args.command in ("report", "all"):
        print(f"report: {report.write(spark, args.out)}")
    if owned:
        spark.stop()
    return 0


def print_health(spark, out, as_of):
    from pyspark.sql import functions as F

    from kcoord.analytics import pipeline

    when = dt.datetime.fromtimestamp(as_of / 1000, dt.UTC).isoformat()
    print(f"Burrow status as of {when}")
    groups = pipeline.read(spark, out, "health_groups").orderBy("group").collect()
    print(f"{'GROUP':30} {'STATUS':7} {'PARTITIONS':>10} {'COMPLETE':>8} {'TOTALLAG':>10} {'MAXLAG':>10}")
    for g in groups:
        print(f"{g['group']:30} {g['status']:7} {g['partition_count']:>10} {g['complete']:>8.2f} "
              f"{g['totallag'] or 0:>10} {g['maxlag'] or 0:>10}")
    bad = pipeline.read(spark, out, "health").where(F.col("status") != "OK") \
        .orderBy("group", "topic", "partition").collect()
    if bad:
        print(f"\n{'GROUP':30} {'TOPIC':20} {'PARTITION':>9} {'STATUS':7} {'CURRENT-OFFSET':>14} "
              f"{'LOG-END-OFFSET':>14} {'LAG':>8} CONSUMER-ID")
        for r in bad:
            print(f"{r['group']:30} {r['topic']:20} {r['partition']:>9} {r['status']:7} "
                  f"{r['current_offset']:>14} {r['log_end_offset'] or '-':>14} {r['current_lag'] or 0:>8} "
                  f"{r['consumer_id'] or '-'}")
