"""Group coordinator failover (issue #27): a 3-node cluster (real etcd, 3 `kcoord serve` processes, 2 s
sessions, `__consumer_offsets` with replication factor 3 and one partition).

A group of three kafka-python consumers (tests/broker/groups/workers) commits after every batch while a
producer writes; the node coordinating the group (FindCoordinator) is SIGKILLed. Measured: the time from
the SIGKILL to the first OffsetFetch sample (every 100 ms, through the node FindCoordinator names then)
showing a commit past what was committed before it — the lease expiring, the controller's election, the
new leader's load of the shard, the clients finding it and committing again. Median and worst over the
rounds, and as a ratio to the session timeout (what the lease alone costs). The killed node is restarted
and registered again before the next round.
"""
from __future__ import annotations

import tempfile
import time

from bench.runner import main, median, ratio, settings

SESSION_MS = 2000


def run(quick: bool = False) -> dict:
    from kafka import KafkaProducer

    from kcoord.testkit.cluster import KafkaCluster
    from tests.broker.groups.procs import python_consumer, stop_all
    from tests.cluster.test_group_coordinator_failover_e2e import TOPIC, OffsetSampler, wait_until

    rounds = 3 if quick else 10
    gaps: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-coordinator-failover-") as workdir:
        cluster = KafkaCluster(workdir, nodes=3, session_timeout_ms=SESSION_MS, overrides={
            "offsets.topic.replication.factor": "3", "default.replication.factor": "3", "num.partitions": "6"}).start()
        members = []
        sampler = OffsetSampler(cluster, ["bench"])
        producer = None
        try:
            bootstrap = cluster.bootstrap_servers
            producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=50, retry_backoff_ms=100)
            producer.send(TOPIC, b"first").get(60)
            members = [python_consumer("kafka-python", bootstrap, "bench", TOPIC, f"bench-{i}", session_timeout_ms=6000,
                                       max_seconds=60 + 20 * rounds) for i in range(3)]
            sampler.start()
            wait_until(lambda: sampler.latest("bench"), 60, "the group's first commit")
            for _ in range(rounds):
                victim = cluster.coordinator_of("bench")
                cluster.kill(victim)
                killed = time.monotonic()
                deadline = killed + 60
                while (gap := sampler.next_commit_after("bench", killed)) is None and time.monotonic() < deadline:
                    producer.send(TOPIC, b"x")  # records to consume, so commits to make
                    time.sleep(0.05)
                if gap is None:
                    raise RuntimeError(f"no commit within 60 s of killing node {victim}")
                gaps.append(gap)
                cluster.restart(victim)
                cluster.wait_registered({1, 2, 3})
        finally:
            sampler.stopping.set()
            stop_all(members)
            if producer is not None:
                producer.close()
            cluster.stop()
    return {
        "name": "coordinator_failover",
        "settings": settings(quick=quick, nodes=3, session_timeout_ms=SESSION_MS, rounds=rounds, members=3,
                             client="kafka-python", offsets_partitions=1, offsets_replication_factor=3),
        "rows": [
            {"measure": "SIGKILL coordinator -> next commit s", "median": round(median(gaps), 2),
             "worst": round(max(gaps), 2), "rounds": rounds},
            {"measure": "per session timeout", "median": round(ratio(median(gaps), SESSION_MS / 1000), 2),
             "worst": round(ratio(max(gaps), SESSION_MS / 1000), 2), "rounds": rounds},
        ],
        "notes": ["the lease (kcoord.etcd.session.timeout.ms) is the floor: a dead node's partitions move once it expires"],
    }


if __name__ == "__main__":
    main(run)
