"""End to end: 10 real consumers form a stable group, then rebalance when one leaves.

Each consumer polls in its own thread and publishes its assignment after every poll. Stable
means the assignments are non-empty, disjoint and cover every partition. Timed: creating the
consumers -> stable, and one consumer's close() (LeaveGroup) -> the others stable again.
kafka-python consumers are compared with confluent-kafka (librdkafka) consumers against the
same server in the same run; both use heartbeat.interval.ms=100 and the same session timeout.
"""

from __future__ import annotations

import threading
import time

from bench import loadgen_wire as w
from bench.loadgen_client import KafkaConn
from bench.loadgen_server import KcoordServer
from bench.runner import arun, main, median, ratio, settings

CONSUMERS = 10
PARTITIONS = 10
TOPIC = "e2e-topic"
SESSION_MS, HEARTBEAT_MS = 6000, 100
PHASE_TIMEOUT_S = 30  # a group not stable by then is a failed rep, reported as such
CLIENT_BUG = "kafka-python client bug"  # prefix of a failed rep the client, not the coordinator, caused


class Polled:
    """One consumer in a poll thread; `assignment` is what it held after its last poll."""

    def __init__(self, make, client: str):
        self.client = client
        self.assignment: frozenset[int] = frozenset()
        self.stop = threading.Event()
        self.consumer = make()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        c = self.consumer
        while not self.stop.is_set():
            if self.client == "kafka-python":
                c.poll(timeout_ms=20)
            else:
                c.poll(0.02)
            self.assignment = frozenset(tp.partition for tp in c.assignment())
        c.close()  # sends LeaveGroup

    def leave(self):
        self.stop.set()
        self.thread.join(timeout=30)


def _kafka_python(port: int, group: str):
    from kafka import KafkaConsumer

    return KafkaConsumer(
        TOPIC,
        bootstrap_servers=f"127.0.0.1:{port}",
        group_id=group,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        enable_auto_commit=False,
        client_id="bench-e2e",
    )


def _confluent(port: int, group: str):
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": group,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.auto.commit": False,
            "client.id": "bench-e2e",
            "log_level": 3,
        }
    )
    c.subscribe([TOPIC])
    return c


def _stable(consumers: list[Polled]) -> bool:
    seen: set[int] = set()
    for c in consumers:
        if not c.assignment or seen & c.assignment:
            return False
        seen |= c.assignment
    return len(seen) == PARTITIONS


def abandoned_join(consumer) -> int | None:
    """The generation a kafka-python consumer silently gave up in, or None.

    kafka-python 3.0.12 drives JoinGroup+SyncGroup as a background task that only a poll() waiting
    in join_group_async() completes (state STABLE, heartbeats on, assignment applied). If poll's
    timeout (20 ms here) runs out mid-join, the next poll re-enters only while need_rejoin() is
    true. When the rejoin was asked for by ConsumerCoordinator's metadata check (the leader first
    assigned before it knew the topic's partitions), the leader's own assignment step copies the
    metadata snapshot mid-join, need_rejoin() turns false and the finished task is never collected:
    the member stays REBALANCING, sends nothing (no heartbeat, no fetch), and the coordinator
    removes it after session.timeout.ms, as Kafka's does. Java's client counts a pending join as a
    rejoin (rejoinNeededOrPending), so it cannot lose one this way."""
    from kafka.structs import MemberState  # only kafka-python consumers get here

    coord = getattr(consumer, "_coordinator", None)
    task = getattr(coord, "_join_task", None)
    if task is None or not task.is_done or coord.state != MemberState.REBALANCING:
        return None
    if coord.need_rejoin():
        return None  # the next poll collects it
    return coord._generation.generation_id


def _diagnose(consumers: list[Polled]) -> str:
    stuck = [(i, gen) for i, c in enumerate(consumers)
             if c.client == "kafka-python" and (gen := abandoned_join(c.consumer)) is not None]
    if not stuck:
        return ""
    who = ", ".join(f"consumer {i} in generation {gen}" for i, gen in stuck)
    return (f"{CLIENT_BUG}: {who} abandoned its own completed JoinGroup/SyncGroup (state REBALANCING, "
            "need_rejoin() false, no heartbeats), so the coordinator expired it as Kafka would; ")


def _wait_stable(consumers: list[Polled], timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if _stable(consumers):
            return time.monotonic() - t0
        time.sleep(0.005)
    raise TimeoutError(f"{_diagnose(consumers)}{what}: not stable after {timeout}s: "
                       f"{[sorted(c.assignment) for c in consumers]}")


def one_run(port: int, client: str, group: str) -> tuple[float, float]:
    make = _kafka_python if client == "kafka-python" else _confluent
    t0 = time.monotonic()
    consumers: list[Polled] = []
    try:
        consumers = [Polled(lambda: make(port, group), client) for _ in range(CONSUMERS)]
        _wait_stable(consumers, PHASE_TIMEOUT_S, f"{client} forming")
        form = time.monotonic() - t0  # includes creating the clients: part of what a user waits for
        leaver = consumers.pop()
        t1 = time.monotonic()
        leaver.leave()
        _wait_stable(consumers, PHASE_TIMEOUT_S, f"{client} after one left")
        return form, time.monotonic() - t1
    finally:
        for c in consumers:
            c.stop.set()
        for c in consumers:
            c.thread.join(timeout=30)


async def _create_topic(port: int) -> None:
    conn = await KafkaConn.open(port)
    try:
        await conn.call(w.CREATE_TOPICS, w.CREATE_TOPICS_V, w.create_topic(TOPIC, PARTITIONS))
    finally:
        conn.close()


def run(quick: bool = False) -> dict:
    reps = 1 if quick else 3
    results: dict[str, list[tuple[float, float]]] = {"kafka-python": [], "confluent-kafka": []}
    failures: list[str] = []
    with KcoordServer({"group.min.session.timeout.ms": "1000"}) as server:
        arun(server.wait_ready())
        arun(_create_topic(server.port))
        for i in range(reps):  # interleaved, so drift in machine load hits both clients alike
            for client in results:
                try:
                    results[client].append(one_run(server.port, client, f"e2e-{client}-{i}"))
                except TimeoutError as exc:  # a stuck group is a finding, not a crash of the benchmark
                    failures.append(str(exc))
    base_form = median(r[0] for r in results["confluent-kafka"])
    base_leave = median(r[1] for r in results["confluent-kafka"])
    rows = []
    for client, runs in results.items():
        form, leave = median(r[0] for r in runs), median(r[1] for r in runs)
        rows.append(
            {
                "client": client,
                "consumers": CONSUMERS,
                "form stable s": form,
                "ratio form": ratio(form, base_form),
                "one leaves -> stable s": leave,
                "ratio leave": ratio(leave, base_leave),
                "ok reps": f"{len(runs)}/{reps}",
            }
        )
    client_bugs = sum(f.startswith(CLIENT_BUG) for f in failures)
    return {
        "name": "e2e",
        "settings": settings(
            reps=reps,
            partitions=PARTITIONS,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            initial_rebalance_delay_ms=0,
        ),
        "rows": rows,
        "notes": [
            "ratios are against confluent-kafka consumers on the same server in the same run; medians over the "
            "reps that completed.",
            *(f"failed rep: {f}" for f in failures),
            *([f"{client_bugs} of {len(failures)} failed reps are kafka-python's own abandoned join (see "
               "bench.e2e.abandoned_join), not a coordinator answer: the member stops sending requests."]
              if client_bugs else []),
        ],
    }


if __name__ == "__main__":
    main(run)
