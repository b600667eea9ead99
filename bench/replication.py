"""Replication (issue #26): a 3-node cluster (real etcd, 3 `kcoord serve` processes, 2 s sessions).

- Throughput: confluent-kafka producing to a topic with replication factor 3 and acks=all (min.insync.
  replicas 2) as a ratio to the same producer with acks=1 to a topic with replication factor 1, on the same
  cluster in the same run, reps interleaved ABAB (bench.runner.interleaved). Both topics have 3 partitions,
  leaders spread over the nodes.
- Sync latency: one record produced and flushed at a time, the same two ways (median).
- Failover: an idempotent acks=all producer (confluent-kafka) writes while the leader of its partition is
  SIGKILLed; the time from the SIGKILL to the producer's next acknowledged write (the 2 s lease expiring,
  the controller's election, the client's metadata refresh and retry), median and worst over the rounds.
  The killed node is restarted and the ISR full again before the next round.
"""
from __future__ import annotations

import tempfile
import time

from bench.runner import interleaved, main, median, ratio, settings

PARTITIONS = 3
VALUE = b"x" * 100


def _topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic("rf3", PARTITIONS, 3, config={"min.insync.replicas": "2"}), NewTopic("rf1", PARTITIONS, 1),
           NewTopic("failover", 1, 3, config={"min.insync.replicas": "2"})]
    for future in admin.create_topics(new).values():
        future.result(30)


def _producer(bootstrap: str, acks: str):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                     "queue.buffering.max.messages": 1_000_000,
                     "error_cb": lambda err: print(f"producer error: {err}", flush=True)})


def _throughput(bootstrap: str, topic: str, acks: str, n: int) -> float:
    producer = _producer(bootstrap, acks)
    producer.produce(topic, VALUE)
    producer.flush(30)  # connected, metadata known
    started = time.perf_counter()
    for i in range(n):
        producer.produce(topic, VALUE, partition=i % PARTITIONS)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"{topic}: records left unsent")
    return n / (time.perf_counter() - started)


def _sync_latency(bootstrap: str, topic: str, acks: str, n: int) -> float:
    producer = _producer(bootstrap, acks)
    producer.produce(topic, VALUE, partition=0)
    producer.flush(30)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        producer.produce(topic, VALUE, partition=0)
        producer.flush(30)
        times.append(time.perf_counter() - started)
    return median(times)


def _failover(cluster, rounds: int) -> list[float]:
    from tests.cluster.replication_checks import History, Producer, acked_after, wait_until

    history = History()
    producer = Producer("confluent", cluster.bootstrap_servers, "failover", history)
    producer.start()
    gaps = []
    try:
        wait_until(lambda: history.of("confluent", "ack"), 30, "the first ack")
        for _ in range(rounds):
            victim = cluster.wait_leader("failover", 0)
            killed = history.add("nemesis", "kill", f"node {victim}")
            cluster.kill(victim)
            ack = wait_until(lambda k=killed: acked_after(history, "confluent", k.t), 60, "an ack after the kill")
            gaps.append(ack.t - killed.t)
            cluster.restart(victim)
            cluster.wait_isr("failover", 0, 3)
    finally:
        producer.stop()
    if producer.error is not None:
        raise RuntimeError(f"producer crashed: {producer.error!r}")
    return gaps


def run(quick: bool = False) -> dict:
    from kcoord.testkit.cluster import KafkaCluster

    n, reps, sync_n, rounds = (5_000, 3, 100, 3) if quick else (50_000, 5, 500, 10)
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-replication-") as workdir:
        cluster = KafkaCluster(workdir, nodes=3, session_timeout_ms=2000).start()
        try:
            _topics(cluster.bootstrap_servers)
            for topic in ("rf3", "rf1"):
                for p in range(PARTITIONS):
                    cluster.wait_leader(topic, p)
            for p in range(PARTITIONS):
                cluster.wait_isr("rf3", p, 3)
            bootstrap = cluster.bootstrap_servers
            rates = interleaved({"rf1_acks1": lambda: _throughput(bootstrap, "rf1", "1", n),
                                 "rf3_acksall": lambda: _throughput(bootstrap, "rf3", "all", n)}, reps)
            latency = interleaved({"rf1_acks1": lambda: _sync_latency(bootstrap, "rf1", "1", sync_n),
                                   "rf3_acksall": lambda: _sync_latency(bootstrap, "rf3", "all", sync_n)}, 2)
            gaps = _failover(cluster, rounds)
        finally:
            cluster.stop()
    base, repl = median(rates["rf1_acks1"]), median(rates["rf3_acksall"])
    lat_base, lat_repl = median(latency["rf1_acks1"]), median(latency["rf3_acksall"])
    return {
        "name": "replication",
        "settings": settings(quick=quick, records=n, value_bytes=len(VALUE), reps=reps, partitions=PARTITIONS,
                             nodes=3, session_timeout_ms=2000, failover_rounds=rounds, client="confluent-kafka"),
        "rows": [
            {"measure": "throughput rec/s", "rf1_acks1": round(base), "rf3_acksall": round(repl),
             "ratio": round(ratio(repl, base), 3)},
            {"measure": "sync produce median ms", "rf1_acks1": round(lat_base * 1000, 2),
             "rf3_acksall": round(lat_repl * 1000, 2), "ratio": round(ratio(lat_repl, lat_base), 3)},
            {"measure": "SIGKILL leader -> next ack s", "median": round(median(gaps), 2),
             "worst": round(max(gaps), 2), "rounds": rounds},
        ],
        "notes": ["ratio = RF 3 acks=all / RF 1 acks=1 (same cluster, same client, reps interleaved)"],
    }


if __name__ == "__main__":
    main(run)
