"""What the replication e2e tests and bench/replication.py share: a history of operations (Jepsen's: each
client operation and each nemesis step, timestamped), idempotent acks=all producers that write into it
from a thread of their own (kafka-python and confluent-kafka), and the checkers: every acknowledged record
read back exactly once at its acknowledged offset, and the replicas' segment files byte-identical up to
the high watermark; and the few steps the cluster tests repeat (a topic created at full ISR, a raw acks=all
produce, the failure message with the history)."""
from __future__ import annotations

import collections
import pathlib
import threading
import time
from dataclasses import dataclass, field

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import build_batch, iter_batches


@dataclass(frozen=True, slots=True)
class Event:
    t: float              # seconds since the history began
    process: str          # "kafka-python", "confluent", "nemesis", "checker"
    kind: str             # send / ack / fail / kill / leader / restart / isr / ...
    value: str = ""
    partition: int = -1
    offset: int = -1
    note: str = ""

    def __str__(self) -> str:
        where = f" p{self.partition}@{self.offset}" if self.partition >= 0 else ""
        return f"{self.t:8.3f} {self.process:<12} {self.kind:<8} {self.value}{where} {self.note}".rstrip()


@dataclass
class History:
    events: list[Event] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, process: str, kind: str, value: str = "", partition: int = -1, offset: int = -1,
            note: str = "") -> Event:
        event = Event(time.monotonic() - self.started, process, kind, value, partition, offset, note)
        with self._lock:
            self.events.append(event)
        return event

    def of(self, process: str, kind: str) -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.process == process and e.kind == kind]

    def text(self, problems: list[str] = (), last: int = 500) -> str:  # type: ignore[assignment]
        """The history as printed on failure: every nemesis, checker, failure and crash event, the sends
        and acks of values a problem names, and per client the first and last ack between nemesis steps."""
        named = {w for p in problems for w in p.replace("(", " ").split()}
        with self._lock:
            events = list(self.events)
        shown, last_ack = [], {}
        for e in events:
            if e.kind in ("send", "ack") and e.value not in named:
                if e.kind == "ack":
                    if e.process not in last_ack:
                        shown.append(e)
                    last_ack[e.process] = e
                continue
            if e.process in ("nemesis", "checker"):
                shown += [a for a in last_ack.values() if a not in shown]
                last_ack = {}
            shown.append(e)
        shown += [a for a in last_ack.values() if a not in shown]
        return "\n".join(map(str, shown[-last:]))


class Producer(threading.Thread):
    """An idempotent acks=all producer writing `<name>-<n>` values to `topic` until stopped; every send,
    acknowledgement and failure goes into the history."""

    def __init__(self, client: str, bootstrap: str, topic: str, history: History, *, rate: float = 200.0) -> None:
        super().__init__(name=f"producer {client}", daemon=True)
        self.client, self.bootstrap, self.topic, self.history = client, bootstrap, topic, history
        self.interval = 1.0 / rate
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.sent = 0

    def run(self) -> None:
        try:
            (self._run_kafka_python if self.client == "kafka-python" else self._run_confluent)()
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.history.add(self.client, "crash", note=repr(exc))

    def _values(self):
        while not self.stopping.is_set():
            value = f"{self.client}-{self.sent}"
            self.sent += 1
            self.history.add(self.client, "send", value)
            yield value
            time.sleep(self.interval)

    def _run_kafka_python(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True,
                                 linger_ms=5, retries=1_000_000, retry_backoff_ms=50, request_timeout_ms=10_000,
                                 delivery_timeout_ms=120_000, metadata_max_age_ms=5_000,
                                 max_in_flight_requests_per_connection=5)
        try:
            for value in self._values():
                future = producer.send(self.topic, value.encode())
                future.add_callback(lambda md, v=value: self.history.add(self.client, "ack", v, md.partition,
                                                                          md.offset))
                future.add_errback(lambda exc, v=value: self.history.add(self.client, "fail", v, note=repr(exc)))
            producer.flush(timeout=120)
        finally:
            producer.close(timeout=10)

    def _run_confluent(self) -> None:
        from confluent_kafka import Producer as ConfluentProducer

        producer = ConfluentProducer({"bootstrap.servers": self.bootstrap, "acks": "all",
                                      "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 120_000,
                                      "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 5_000})

        def delivered(err, msg) -> None:
            value = msg.value().decode()
            if err is None:
                self.history.add(self.client, "ack", value, msg.partition(), msg.offset())
            else:
                self.history.add(self.client, "fail", value, note=str(err))

        for value in self._values():
            producer.produce(self.topic, value.encode(), on_delivery=delivered)
            producer.poll(0)
        remaining = producer.flush(120)
        if remaining:
            self.history.add(self.client, "fail", note=f"{remaining} records still queued after flush")

    def stop(self, timeout: float = 150.0) -> None:
        self.stopping.set()
        self.join(timeout)


def wait_until(predicate, timeout: float, what: str):
    """predicate() every 50 ms until it is truthy; returns that value (AssertionError naming `what`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.05)


def acked_after(history: History, client: str, t: float) -> Event | None:
    """The first acknowledgement `client` got at or after `t`."""
    return next((e for e in history.of(client, "ack") if e.t >= t), None)


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> tuple[list[tuple[int, int, str]],
                                                                                          dict[int, int]]:
    """Every record of `topic` from the beginning up to its end offsets (the high watermarks) as
    (partition, offset, value), and those end offsets."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=20_000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}
        records: list[tuple[int, int, str]] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp.partition] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: read to {[consumer.position(tp) for tp in tps]}, ends {ends}")
            for batch in consumer.poll(timeout_ms=500).values():
                records += [(r.partition, r.offset, r.value.decode()) for r in batch]
        return records, ends
    finally:
        consumer.close()


def check_exactly_once(history: History, client: str, records: list[tuple[int, int, str]]) -> list[str]:
    """Problems with `client`'s records: an acknowledged one missing or not at its acknowledged offset, or
    any value read more than once (idempotence: not even an unacknowledged one twice)."""
    problems = []
    mine = [(p, o, v) for p, o, v in records if v.startswith(client + "-")]
    counts = collections.Counter(v for _p, _o, v in mine)
    where = {v: (p, o) for p, o, v in mine}
    problems += [f"{v} read {n} times" for v, n in counts.items() if n > 1]
    for ack in history.of(client, "ack"):
        if ack.value not in where:
            problems.append(f"acknowledged {ack.value} (p{ack.partition}@{ack.offset}) lost")
        elif where[ack.value] != (ack.partition, ack.offset):
            problems.append(f"acknowledged {ack.value} at p{ack.partition}@{ack.offset}, read at {where[ack.value]}")
    return problems


def segment_bytes(data_dir: pathlib.Path, topic: str, partition: int, high_watermark: int) -> tuple[bytes, int]:
    """The batches of a replica's segments below `high_watermark`, concatenated, and the offset they
    reach (the next offset after the last batch taken)."""
    chunks, reached = [], 0
    for segment in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        for _pos, header, batch in iter_batches(segment.read_bytes()):
            if header.last_offset < high_watermark and header.base_offset >= reached:
                chunks.append(bytes(batch))
                reached = header.next_offset
    return b"".join(chunks), reached


def check_identical_replicas(data_dirs: dict[int, pathlib.Path], topic: str, partition: int,
                             high_watermark: int) -> list[str]:
    """Every replica's log holds the same bytes up to the high watermark (and reaches it)."""
    logs = {node: segment_bytes(d, topic, partition, high_watermark) for node, d in data_dirs.items()}
    problems = [f"{topic}-{partition} on node {n} reaches offset {reached} < high watermark {high_watermark}"
                for n, (_b, reached) in logs.items() if reached < high_watermark]
    distinct = {data for data, _ in logs.values()}
    if len(distinct) > 1:
        sizes = {n: (len(data), reached) for n, (data, reached) in logs.items()}
        problems.append(f"{topic}-{partition}: replicas differ below the high watermark {high_watermark}: "
                        f"(bytes, offset reached) per node {sizes}")
    return problems


def data_dirs(cluster) -> dict[int, pathlib.Path]:
    """Each node's data directory (a testkit KafkaCluster), for check_identical_replicas."""
    return {n: cluster.data_dir(n) for n in cluster.nodes}


def fail_on(history: History, problems: list[str]) -> None:
    """Fails the test with the problems found and the history that led to them."""
    if problems:
        raise AssertionError("\n".join(problems[:50]) + "\n--- history (sends omitted) ---\n" + history.text(problems))


def create_topic(cluster, admin, name: str, replicas: list[int], min_isr: int = 2) -> None:
    """One partition on `replicas` (in that order, the first the preferred leader), back once its ISR is full."""
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic(name, replica_assignments={0: replicas},
                                  topic_configs={"min.insync.replicas": str(min_isr)})])
    cluster.wait_isr(name, 0, len(replicas))


def produce_request(topic: str, values: list[str], acks: int = -1, timeout_ms: int = 60_000) -> m.ProduceRequest:
    """A Produce of `values` to partition 0 of `topic`, for a raw KafkaWireClient."""
    R = m.ProduceRequest
    batch = build_batch([(None, v.encode()) for v in values])
    return R(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        R.TopicProduceData(name=topic, partition_data=[R.PartitionProduceData(index=0, records=batch)])])


def produce_error(response) -> ErrorCode:
    """The error of produce_request's one partition."""
    return ErrorCode(response.responses[0].partition_responses[0].error_code)
