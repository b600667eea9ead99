"""Exactly-once throughput: confluent-kafka's consume-transform-produce loop with transactions
(send_offsets_to_transaction + commit_transaction per batch) as a ratio to the same loop without them
(an idempotent producer flushed, then a synchronous offset commit, per batch), against the same server
in the same run, reps interleaved ABAB; the ratio is the median of the per-rep ratios (each rep's two
loops run back to back), as the other rows', so the host's drift between reps cancels. Also EndTxn
latency: commit_transaction() after the batch's records are flushed, so what is timed is the EndTxn
round trip (PrepareCommit durable; the markers follow, and the next transaction's first request waits
for them), p50/p99.

Per transaction, librdkafka 2.16 waits for AddOffsetsToTxn, then AddPartitionsToTxn and TxnOffsetCommit
(together), then Produce, then EndTxn: four durable round trips where the plain loop has two (Produce,
OffsetCommit), and seven fsyncs (those five, PrepareCommit's and the markers') against two.
"""
from __future__ import annotations

import time

from bench.loadgen_server import KcoordServer
from bench.runner import main, median, quantile, ratio, settings

PARTITIONS = 3
BATCH = 100


def _admin_ready(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 120
    while True:
        try:
            for f in admin.create_topics([NewTopic(t, PARTITIONS) for t in topics]).values():
                f.result(30)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _fill(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(60)


def _loop(bootstrap: str, source: str, sink: str, n: int, transactional: bool, tag: str,
          on_first_batch=None) -> tuple[float, list]:
    """Records/s of one run over `n` inputs, and the EndTxn latencies (s) when transactional. `on_first_batch`
    is called once the first batch is in hand, before the timing starts (bench.transactions_breakdown)."""
    from confluent_kafka import Consumer, Producer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{tag}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    conf.update({"transactional.id": f"bench-{tag}"} if transactional else {"enable.idempotence": True})
    producer = Producer(conf)
    if transactional:
        producer.init_transactions(60)
    consumer.subscribe([source])
    done, latencies, started = 0, [], None
    while done < n:
        msgs = [m for m in consumer.consume(BATCH, timeout=1.0) if m.error() is None]
        if not msgs:
            continue
        if started is None:
            if on_first_batch is not None:
                on_first_batch()
            started = time.perf_counter()
        if transactional:
            producer.begin_transaction()
        for m in msgs:
            producer.produce(sink, value=m.value(), partition=m.partition())
        positions = consumer.position(consumer.assignment())
        if transactional:
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
            producer.flush(60)
            t0 = time.perf_counter()
            producer.commit_transaction(60)
            latencies.append(time.perf_counter() - t0)
        else:
            producer.flush(60)
            consumer.commit(offsets=[p for p in positions if p.offset >= 0], asynchronous=False)
        done += len(msgs)
    elapsed = time.perf_counter() - started
    consumer.close()
    return done / elapsed, latencies


def run(quick: bool = False) -> dict:
    n = 2_000 if quick else 20_000
    reps = 2 if quick else 6
    server = KcoordServer({"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"})
    bootstrap = f"127.0.0.1:{server.port}"
    try:
        _admin_ready(bootstrap, ["bench-in", "bench-out"])
        _fill(bootstrap, "bench-in", n)
        rates: dict[bool, list[float]] = {True: [], False: []}
        latencies: list[float] = []
        for rep in range(reps):
            for transactional in ((False, True) if rep % 2 == 0 else (True, False)):
                rate, lat = _loop(bootstrap, "bench-in", "bench-out", n, transactional,
                                  f"{'eos' if transactional else 'plain'}-{rep}")
                rates[transactional].append(rate)
                latencies += lat
    finally:
        server.proc.terminate()
        server.proc.wait(30)
    eos, plain = median(rates[True]), median(rates[False])
    per_rep = [ratio(e, p) for e, p in zip(rates[True], rates[False], strict=True)]
    return {
        "name": "transactions",
        "settings": settings(inputs=n, batch=BATCH, reps=reps, partitions=PARTITIONS),
        "rows": [
            {"what": "consume-transform-produce, no transactions", "records/s": plain, "ratio": 1.0},
            {"what": "exactly-once (a transaction per batch)", "records/s": eos, "ratio": median(per_rep),
             "ratio range": f"{min(per_rep):.2f}-{max(per_rep):.2f}",
             "EndTxn p50 ms": quantile(latencies, 0.5) * 1000, "EndTxn p99 ms": quantile(latencies, 0.99) * 1000},
        ],
    }


if __name__ == "__main__":
    main(run)
