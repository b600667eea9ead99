"""Share groups (KIP-932): one confluent-kafka ShareConsumer (implicit acknowledgement: every poll's
records accepted on the next poll) reading a one-partition topic, as a ratio to a confluent-kafka
consumer-group consumer reading the same records from the same server in the same run, reps
interleaved ABAB, each rep in a fresh group, timed from subscribe to the last record (joining the group
included: librdkafka's consumer prefetches the whole topic into its queue before its first records
come out, so a time from the first record measures its queue, not the broker); the ratio is the
median of the per-rep ratios. Also the acknowledgement round trip: an explicit-mode
ShareConsumer's commit_sync() of one poll's records (a ShareAcknowledge, durable in __share_group_state
before the answer), p50/p99.
"""
from __future__ import annotations

import time

from bench.loadgen_server import KcoordServer
from bench.runner import main, median, quantile, ratio, settings

TOPIC = "bench-share"


def _ready(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 120
    while True:
        try:
            for f in admin.create_topics([NewTopic(TOPIC, 1)]).values():
                f.result(30)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _fill(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(n):
        p.produce(TOPIC, value=b"v%d" % i)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(60)


def _earliest(bootstrap: str, group: str) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-share-admin")
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, group,
                                            configs={"share.auto.offset.reset": "earliest"})])
    finally:
        admin.close()


def _rate(got: int, start: float, n: int) -> float:
    if got < n:
        raise RuntimeError(f"read {got} of {n} records in 120 s")
    return got / (time.monotonic() - start)


def _consumer_group(bootstrap: str, group: str, n: int) -> float:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([TOPIC])
        start, got, deadline = time.monotonic(), 0, time.monotonic() + 120
        while got < n and time.monotonic() < deadline:
            got += sum(1 for msg in c.consume(500, 0.5) if msg.error() is None)
        return _rate(got, start, n)
    finally:
        c.close()


def _share(bootstrap: str, group: str, n: int, acks: list[float] | None = None) -> float:
    from confluent_kafka import AcknowledgeType, ShareConsumer
    _earliest(bootstrap, group)
    config = {"bootstrap.servers": bootstrap, "group.id": group}
    if acks is not None:
        config["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(config)
    try:
        c.subscribe([TOPIC])
        start, got, deadline = time.monotonic(), 0, time.monotonic() + 120
        while got < n and time.monotonic() < deadline:
            messages = [msg for msg in c.poll(0.5) if msg.error() is None]
            got += len(messages)
            if acks is not None and messages:
                for msg in messages:
                    c.acknowledge(msg, AcknowledgeType.ACCEPT)
                t0 = time.monotonic()
                c.commit_sync()
                acks.append(time.monotonic() - t0)
        return _rate(got, start, n)
    finally:
        c.close()


def run(quick: bool = False) -> dict:
    n = 5_000 if quick else 50_000
    reps = 2 if quick else 4
    server = KcoordServer({"offsets.topic.num.partitions": "5", "share.coordinator.state.topic.num.partitions": "5"})
    bootstrap = f"127.0.0.1:{server.port}"
    try:
        _ready(bootstrap)
        _fill(bootstrap, n)
        rates: dict[str, list[float]] = {"consumer": [], "share": []}
        acks: list[float] = []
        for rep in range(reps):
            for kind in (("consumer", "share") if rep % 2 == 0 else ("share", "consumer")):
                run_one = _consumer_group if kind == "consumer" else _share
                rates[kind].append(run_one(bootstrap, f"bench-{kind}-{rep}", n))
            _share(bootstrap, f"bench-acks-{rep}", n, acks)
    finally:
        server.proc.terminate()
        server.proc.wait(30)
    share, consumer = median(rates["share"]), median(rates["consumer"])
    per_rep = median([ratio(a, b) for a, b in zip(rates["share"], rates["consumer"], strict=True)])
    return {
        "name": "share_groups",
        "settings": settings(records=n, reps=reps, partitions=1),
        "rows": [
            {"what": "consumer group (confluent-kafka Consumer)", "records/s": consumer, "ratio": 1.0},
            {"what": "share group (ShareConsumer, implicit acknowledgement)", "records/s": share,
             "ratio": per_rep},
            {"what": "ShareAcknowledge round trip (explicit commit_sync per poll)",
             "p50 ms": quantile(acks, 0.5) * 1000, "p99 ms": quantile(acks, 0.99) * 1000},
        ],
    }


if __name__ == "__main__":
    main(run)
