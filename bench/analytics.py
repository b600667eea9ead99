"""Analytics pipeline throughput: decoding a generated `__consumer_offsets` store.

Rows: the same segment decoder (kcoord.analytics.segment) in one plain Python process (the baseline), and
through Spark's Python Data Source with local[2] (decode + an aggregate over every row, so every
record crosses into the JVM). `python -m bench.analytics [--quick]` prints a markdown table.

The store: template batches (kafka-python's builder + the reference key/value layouts, as in the
tests) of 1-20 offset commits each - one consumer's commit of its partitions - tiled to the wanted
size with patched base offsets (the CRC does not cover the base offset, so the batches stay valid).
"""
import os
import random
import struct
import sys
import tempfile
import time

from bench.runner import median
from kcoord.analytics import layout
from kcoord.analytics.segment import SegmentDecoder, read_file

SEGMENT_BYTES = 32 << 20
LOG_PARTITIONS = 8


def generate_store(root, records, seed=1):
    from tests.analytics import storegen as g

    rnd = random.Random(seed)
    templates = []
    for _ in range(2048):
        group, topic = f"group-{rnd.randrange(500)}", f"topic-{rnd.randrange(50)}"
        ts = 1_700_000_000_000 + rnd.randrange(86_400_000)
        recs = [(ts, g.offset_commit_key(group, topic, p), g.offset_commit_value(rnd.randrange(1 << 40), ts),
                 None) for p in range(rnd.randint(1, 20))]
        templates.append((len(recs), g.batch(recs, 0)))
    written, per_part = 0, -(-records // LOG_PARTITIONS)
    for part in range(LOG_PARTITIONS):
        d = os.path.join(root, f"{layout.OFFSETS_TOPIC}-{part}")
        os.makedirs(d, exist_ok=True)
        offset, segment, out, size = 0, None, [], 0
        target = min(per_part, records - written)
        while offset < target:
            if segment is None:
                segment, out, size = os.path.join(d, f"{offset:020d}.log"), [], 0
            n, data = templates[rnd.randrange(len(templates))]
            b = bytearray(data)
            struct.pack_into(">q", b, 0, offset)
            out.append(b)
            size += len(b)
            offset += n
            if size >= SEGMENT_BYTES or offset >= target:
                with open(segment, "wb") as f:
                    f.write(b"".join(out))
                segment = None
        written += offset
    return written


def plain_python(root):
    """(rows, wall s, CPU s) of the baseline: one process decoding every segment."""
    t0, c0 = time.perf_counter(), time.process_time()
    rows = 0
    for seg in layout.list_segments(root):
        for batch in SegmentDecoder(read_file(seg.path), seg.partition).commits():
            rows += batch.num_rows
    return rows, time.perf_counter() - t0, time.process_time() - c0   # CPU: what one core does


def _tree_cpu_s():
    """CPU seconds of this process and all its descendants (the JVM, PySpark's daemon and workers),
    children already reaped included; Linux /proc only."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(pid)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))  # ppid, u+s+cu+cs time
    me, total = os.getpid(), 0
    for pid, (_, ticks) in stats.items():
        p = pid
        while p > 1 and p != me:
            p = stats.get(p, (0, 0))[0]
        if p == me:
            total += ticks
    return total / tick


def spark_local2(root):
    """A function like plain_python for Spark local[2]: the session and a first pass (JVM start, planning,
    Python workers) happen once, on the first call, outside the timing."""
    from pyspark.sql import functions as F

    from kcoord.analytics import session, source

    if getattr(spark_local2, "df", None) is None:
        spark = session.get_or_create("local[2]", progress=False)
        spark_local2.df = source.commits(spark, root)
        spark_local2.df.agg(F.count("*"), F.sum("current_offset")).collect()
    t0, c0 = time.perf_counter(), _tree_cpu_s()
    (rows, _), = spark_local2.df.agg(F.count("*"), F.sum("current_offset")).collect()
    return rows, time.perf_counter() - t0, _tree_cpu_s() - c0


PATHS = (("plain Python, 1 process", plain_python), ("Spark local[2] data source", spark_local2))


def run(quick=False):
    """Wall-clock rates; the settings carry the load average, since other work shares the cores.

    Reps alternate the two paths ABBA, so a drift in the machine's speed hits both alike; a row's ratio
    is the median over reps of its rate over the baseline's rate in the same rep."""
    records, reps = (1_000_000, 2) if quick else (10_000_000, 4)
    load_before = os.getloadavg()[0]
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-analytics-") as root:
        t0 = time.perf_counter()
        written = generate_store(root, records)
        gen_s = time.perf_counter() - t0
        segments = layout.list_segments(root)
        size = sum(s.size for s in segments)
        runs = {name: [] for name, _ in PATHS}
        for i in range(reps):
            for name, fn in PATHS if i % 2 == 0 else PATHS[::-1]:
                rows, secs, cpu = fn(root)
                assert rows == written, (name, rows, written)
                runs[name].append((secs, cpu))
        spark_local2.df = None
        base = runs[PATHS[0][0]]
        result_rows = []
        for name, rs in runs.items():
            secs = median(s for s, _ in rs)
            result_rows.append({
                "path": name, "records": written, "seconds": round(secs, 2),
                "records_per_s": int(written / secs), "MB_per_s": round(size / secs / 1e6, 1),
                # per CPU second (all processes involved): what the cores would give if nothing else ran
                "records_per_cpu_s": int(written / median(c for _, c in rs)),
                "vs_baseline": round(median(b / s for (s, _), (b, _) in zip(rs, base, strict=True)), 2),
                "cpu_vs_baseline": round(median(bc / c for (_, c), (_, bc) in zip(rs, base, strict=True)), 2),
                "max/min s": round(max(s for s, _ in rs) / min(s for s, _ in rs), 2),
            })
    return {"name": "analytics", "settings": {"records": written, "store_bytes": size,
                                              "segments": len(segments), "reps": reps, "order": "ABBA",
                                              "generate_s": round(gen_s, 1), "cores": os.cpu_count(),
                                              "load_avg_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
                                              "elapsed_s": round(time.perf_counter() - t_start, 1)},
            "rows": result_rows,
            "notes": ["seconds: median over reps; vs_baseline: median over reps of the plain-Python time over "
                      "this path's time in the same rep; cpu_vs_baseline: the same with CPU seconds of every "
                      "process involved (Spark local[2] runs on both cores, the baseline on one)."]}


def markdown(result):
    rows = result["rows"]
    cols = list(rows[0])
    lines = [f"### {result['name']}  {result['settings']}", "| " + " | ".join(cols) + " |",
             "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(run(quick="--quick" in sys.argv)))
