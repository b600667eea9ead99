"""Where an exactly-once batch's time goes: bench.transactions' two loops (a transaction per batch, and the same
loop without transactions), each against a server that fsyncs every append (kcoord's default) and one that
leaves flushing to the OS (`log.flush.interval.messages` huge, Kafka's default), with per batch:
- the server's time in each API (its `/metrics` request-time sums: arrival to answer, fsync waits included),
- the server process's CPU (every thread), and the batch's wall time (from the loop's records/s).
The loops wait for one request at a time, so what a transaction adds shows as APIs in the table; the ratio of
the two loops on the OS-flush server is what fsync-free storage alone could reach.
"""
from __future__ import annotations

import re
import urllib.request

from bench import transactions as t
from bench.loadgen import free_port
from bench.loadgen_server import KcoordServer
from bench.runner import main, median, proc_cpu_seconds, settings

NO_FSYNC = {"log.flush.interval.messages": str(2**62)}
_SUMMARY = re.compile(r'kcoord_request_seconds_(sum|count)\{api="(\w+)"\} (\S+)')
# what a batch of each loop asks for in turn; the rest (Fetch long polls, group and metadata upkeep) is left out
APIS = ("AddOffsetsToTxn", "AddPartitionsToTxn", "TxnOffsetCommit", "Produce", "EndTxn", "OffsetCommit")


def _request_seconds(metrics_port: int) -> dict[str, tuple[float, float]]:
    """{api: (count, seconds)} so far."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    out: dict[str, list[float]] = {}
    for kind, api, value in _SUMMARY.findall(text):
        out.setdefault(api, [0.0, 0.0])[0 if kind == "count" else 1] = float(value)
    return {api: (c, s) for api, (c, s) in out.items()}


def _measure(server: KcoordServer, metrics_port: int, n: int, transactional: bool, tag: str) -> dict:
    at_start: list = []

    def first_batch() -> None:
        at_start[:] = [_request_seconds(metrics_port), proc_cpu_seconds(server.pid)]

    rate, _ = t._loop(f"127.0.0.1:{server.port}", "bench-in", "bench-out", n, transactional, tag, first_batch)
    cpu = proc_cpu_seconds(server.pid) - at_start[1]  # the loop's consumer.close() after the timing is counted too
    before, after = at_start[0], _request_seconds(metrics_port)
    batches = n / t.BATCH
    row = {"ms a batch": t.BATCH / rate * 1000, "server CPU ms": cpu / batches * 1000}
    for api in APIS:
        count, seconds = (a - b for a, b in zip(after.get(api, (0, 0)), before.get(api, (0, 0)), strict=True))
        if count:
            row[f"{api} ms"] = seconds / batches * 1000
    return row


def run(quick: bool = False) -> dict:
    n = 2_000 if quick else 20_000
    reps = 1 if quick else 3
    rows = []
    for storage, overrides in (("fsync per append", {}), ("OS flush", NO_FSYNC)):
        metrics_port = free_port()
        server = KcoordServer({"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5",
                               "metrics.port": str(metrics_port), **overrides})
        bootstrap = f"127.0.0.1:{server.port}"
        try:
            t._admin_ready(bootstrap, ["bench-in", "bench-out"])
            t._fill(bootstrap, "bench-in", n)
            runs: dict[bool, list[dict]] = {False: [], True: []}
            for rep in range(reps):
                for transactional in ((False, True) if rep % 2 == 0 else (True, False)):
                    runs[transactional].append(_measure(server, metrics_port, n, transactional,
                                                        f"{'eos' if transactional else 'plain'}-{rep}"))
        finally:
            server.proc.terminate()
            server.proc.wait(30)
        for transactional in (False, True):
            keys = sorted({k for r in runs[transactional] for k in r}, key=lambda k: (k != "ms a batch", k))
            rows.append({"storage": storage, "loop": "exactly-once" if transactional else "plain",
                         **{k: median([r.get(k) for r in runs[transactional]]) for k in keys}})
        plain, eos = rows[-2]["ms a batch"], rows[-1]["ms a batch"]
        rows[-1]["ratio"] = plain / eos if eos else float("nan")
    return {"name": "transactions_breakdown",
            "settings": settings(inputs=n, batch=t.BATCH, reps=reps, partitions=t.PARTITIONS), "rows": rows}


if __name__ == "__main__":
    main(run)
