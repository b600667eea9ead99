"""End to end: 10 real consumers form a stable group, then rebalance when one leaves.

Each consumer polls in its own thread (POLL_MS per poll); its client's rebalance callbacks record
what it holds and when it got it. Stable means the holdings are non-empty, disjoint and cover every
partition (see bench.e2e_stats). Timed: the ten consumers (already created) subscribe -> stable, and, once the group has been stable a
while, one consumer's close() (LeaveGroup) -> the other nine stable again. kafka-python consumers
are compared with confluent-kafka (librdkafka) consumers against the same server in the same run,
reps interleaved ABBA; both use heartbeat.interval.ms=100 and the same session timeout.
"""

from __future__ import annotations

import os
import threading
import time

from bench import loadgen_wire as w
from bench.e2e_log import LogTail, between, group_events, timeline
from bench.e2e_stats import (
    TRIM,
    Rep,
    extra_rebalance_notes,
    form_stage_notes,
    leave_delays,
    stable_since,
    summarize,
)
from bench.loadgen_client import KafkaConn
from bench.loadgen_server import KcoordServer
from bench.runner import Deadline, arun, main, settings

CONSUMERS = 10
PARTITIONS = 10
TOPIC = "e2e-topic"
SESSION_MS, HEARTBEAT_MS = 6000, 100
# The poll timeout both clients' poll loops use. kafka-python 3.0.12 runs JoinGroup+SyncGroup as a
# background task that only a poll() waiting on it collects; when the task finishes between two polls,
# the next poll drops it and sends a fresh JoinGroup (join_group_async replaces a done _join_task).
# At 20 ms a ~0.2 s join spans ~10 polls and that happened several times per rep (counted by hooking
# _join_task: 5-23 finished joins dropped per rep); when the member was the leader its JoinGroup in
# Stable starts a new generation, as Kafka's coordinator does ("Leader ... re-joining group during
# Stable"): in one whole run 6 of 28 forming reps and 5 of 28 leaves took 1-2 extra generations, and
# up to 9 in one probe rep. kafka-python's form times spread 0.24-1.6 s, moving with how long its 20
# poll and IO threads waited for the GIL, so with the machine's load (form ratio 1.2-2.1 over runs).
# At 500 ms a join ends inside one poll: 0-2 dropped per rep; in 12 runs of 28 reps 2 leaves took a
# leader's extra generation (and 1 forming a late member's); form 0.22-0.30 s but for write stalls. Applications poll for 0.1-1 s (confluent-kafka's
# examples use 1 s). librdkafka runs the protocol in its own thread and serves callbacks in poll as
# they come: its times were the same at 20 and 500 ms (form 0.21 s; leave the sawtooth below).
POLL_MS = 500
REPS = 28
# A leave comes SETTLE_S after stable, plus a phase stratified over PHASE_WINDOW_S (bench.e2e_stats.
# leave_delays). Measured here: how long librdkafka takes to rebalance after a leave is periodic in
# when the leave comes (a sawtooth from ~0.5 s down to ~0.03 s, period ~0.5 s, alike at POLL_MS 20
# and 500); kafka-python's heartbeat timer restarts at every join. Whole periods, evenly sampled,
# make the medians a property of the clients, not of where the leaves happened to fall.
SETTLE_S, PHASE_WINDOW_S = 1.0, 1.0
# KIP-134's delay before an empty group's first rebalance, one heartbeat interval here (Kafka's default
# is 3 s). At 0 the ten joins race the first generations: librdkafka then often gets SyncGroup
# REBALANCE_IN_PROGRESS and waits out its 1 s JoinGroup backoff (form 0.12 s or 2.0 s, a coin toss),
# and kafka-python mostly abandons a join (see abandoned_join), so no two runs agreed.
INITIAL_REBALANCE_DELAY_MS = 100
PHASE_TIMEOUT_S = 30  # a group not stable by then is a failed rep, reported as such
# An abandoned join seen this long is conclusive: a finished join waits only for the poll already
# waiting on it (or, see POLL_MS, for the next poll to drop it), never seconds.
STUCK_S = 1.0
CLIENT_BUG = "kafka-python client bug"  # prefix of a failed rep the client, not the coordinator, caused
BASELINE = "confluent-kafka"


class ClientBug(Exception):
    """The rep failed through the client's own fault (kafka-python's abandoned join)."""


class Polled:
    """One consumer in a poll thread; `held` is what its client last assigned it, and when."""

    def __init__(self, make, client: str):
        self.client = client
        self.held: tuple[frozenset[int], float] = (frozenset(), time.monotonic())
        self.closing_at = float("nan")  # when its close() (LeaveGroup) began
        self.closing_wall = float("nan")  # the same moment on the wall clock, the server log's
        # Its poll loop close()s at this monotonic moment: no poll runs past it, so the leave comes
        # when it is due, not up to POLL_MS later (the leave's phase matters, see leave_delays).
        self.leave_at = float("inf")
        self.stop = threading.Event()
        self.consumer, self._subscribe = make(self._assigned, self._revoked)
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        """Subscribe and start polling: the group forms from here."""
        self._subscribe()
        self.thread.start()

    def _assigned(self, partitions):
        self.held = (frozenset(tp.partition for tp in partitions), time.monotonic())

    def _revoked(self, _partitions):  # eager protocol: a rebalance takes every partition away first
        self.held = (frozenset(), time.monotonic())

    def _loop(self):
        c = self.consumer
        kafka_python = self.client == "kafka-python"
        while not self.stop.is_set():
            timeout = min(POLL_MS / 1000, self.leave_at - time.monotonic())
            if timeout <= 0:
                break
            if kafka_python:
                c.poll(timeout_ms=max(1, round(timeout * 1000)))
            else:
                c.poll(timeout)
        self.closing_at, self.closing_wall = time.monotonic(), time.time()
        c.close()  # sends LeaveGroup

    def leave(self, at: float):
        """close() at monotonic `at` (from its own poll loop), and wait until it has."""
        self.leave_at = at
        self.thread.join(timeout=max(0.0, at - time.monotonic()) + PHASE_TIMEOUT_S)


def _kafka_python(port: int, group: str, assigned, revoked):
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    class Listener(ConsumerRebalanceListener):  # kafka-python insists on the subclass
        def on_partitions_revoked(self, partitions):
            revoked(partitions)

        def on_partitions_assigned(self, partitions):
            assigned(partitions)

    c = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}",
        group_id=group,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        enable_auto_commit=False,
        client_id="bench-e2e",
    )
    # The topic's metadata is fetched before the timing starts, as for confluent-kafka below. Without it
    # the leader may assign before its first metadata answer, see the topic's partitions change right
    # after, and rejoin: a second rebalance that depends only on that race (kafka-python's
    # ConsumerCoordinator compares its assignment-time metadata snapshot with the current one).
    c.partitions_for_topic(TOPIC)
    return c, lambda: c.subscribe([TOPIC], listener=Listener())


def _confluent(port: int, group: str, assigned, revoked):
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
    c.list_topics(TOPIC, timeout=PHASE_TIMEOUT_S)  # connected, the topic's metadata known
    # Without an assign() in the callback the library assigns the partitions itself afterwards.
    return c, lambda: c.subscribe([TOPIC], on_assign=lambda _c, ps: assigned(ps), on_revoke=lambda _c, ps: revoked(ps))


def abandoned_join(consumer) -> int | None:
    """The generation a kafka-python consumer silently gave up in, or None.

    kafka-python 3.0.12 drives JoinGroup+SyncGroup as a background task that only a poll() waiting
    in join_group_async() completes (state STABLE, heartbeats on, assignment applied). If poll's
    timeout (POLL_MS) runs out mid-join, the next poll re-enters only while need_rejoin() is true
    (and then drops the finished task and joins again, see POLL_MS). When the rejoin was asked for
    by ConsumerCoordinator's metadata check (the leader first assigned before it knew the topic's
    partitions), the leader's own assignment step copies the
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
        return None  # the next poll drops it and joins again (see POLL_MS): slower, not stuck
    return coord._generation.generation_id


def _abandoned(consumers: list[Polled]) -> str:
    stuck = [(i, gen) for i, c in enumerate(consumers)
             if c.client == "kafka-python" and (gen := abandoned_join(c.consumer)) is not None]
    return ", ".join(f"consumer {i} in generation {gen}" for i, gen in stuck)


def _wait_stable(consumers: list[Polled], what: str) -> float:
    """The monotonic time the consumers became stable (exact, from their callbacks' timestamps).

    A kafka-python consumer that abandoned its join would hold the group back until the coordinator
    expired it and then stay out for good, so once that is certain the rep ends as the client's bug
    instead of waiting out PHASE_TIMEOUT_S."""
    deadline = Deadline(PHASE_TIMEOUT_S)
    stuck_since, who = float("inf"), ""
    while not deadline.expired():
        at = stable_since([c.held for c in consumers], PARTITIONS)
        if at is not None:
            return at
        who = _abandoned(consumers)
        stuck_since = min(stuck_since, time.monotonic()) if who else float("inf")
        if time.monotonic() - stuck_since >= STUCK_S:
            raise ClientBug(f"{CLIENT_BUG}: {what}: {who} abandoned its own completed JoinGroup/SyncGroup "
                            f"(state REBALANCING, need_rejoin() false, no heartbeats for {STUCK_S}s); the "
                            "coordinator expires such a member after session.timeout.ms, as Kafka does")
        time.sleep(0.01)  # only how soon we notice; the stable moment itself comes from the callbacks
    raise TimeoutError(f"{what}: not stable after {PHASE_TIMEOUT_S}s: "
                       f"{[sorted(c.held[0]) for c in consumers]}")


def _time_leave(consumers: list[Polled], stable_at: float, delay: float, rep: Rep) -> Polled:
    """The last consumer leaves `delay` after the stable moment; timed from its close() to the
    others' new stable moment."""
    leaver = consumers.pop()
    leaver.leave(stable_at + delay)
    rep.leave = _wait_stable(consumers, f"{rep.client} after one left") - leaver.closing_at
    return leaver


def _record_events(rep: Rep, found: list, t0_wall: float, leave_wall: float, end_wall: float) -> None:
    """The server's rebalance events of this rep's group, split into the form and the leave phase,
    each timed from its phase's start (the subscriptions; the leaver's close())."""
    rep.form_events = timeline(between(found, t0_wall, leave_wall), t0_wall)
    rep.leave_events = timeline(between(found, leave_wall, end_wall), leave_wall)


def one_rep(port: int, client: str, group: str, leave_delay: float, log: LogTail) -> Rep:
    """Form a group of CONSUMERS, then time one leave; a failure ends the rep."""
    make = _kafka_python if client == "kafka-python" else _confluent
    rep = Rep(client, leave_delay=leave_delay)
    consumers: list[Polled] = []
    t0_wall = leave_wall = float("inf")
    try:
        consumers = [Polled(lambda a, r: make(port, group, a, r), client) for _ in range(CONSUMERS)]
        # Timed from the subscriptions, the clients already created: creating one is the library's own
        # start-up (bootstrap connection, version probe), pure-Python CPU for kafka-python, whose time
        # moved with the machine's speed between runs, and not group formation.
        t0, t0_wall = time.monotonic(), time.time()
        for c in consumers:
            c.start()
        stable_at = _wait_stable(consumers, f"{client} forming")
        rep.form = stable_at - t0
        leaver = _time_leave(consumers, stable_at, leave_delay, rep)
        leave_wall = leaver.closing_wall
    except ClientBug as exc:
        rep.failure, rep.client_bug = str(exc), True
    except TimeoutError as exc:  # a stuck group is a finding, not a crash of the benchmark
        rep.failure = str(exc)
    finally:
        end_wall = time.time()  # before the teardown's own LeaveGroups
        for c in consumers:
            c.stop.set()
        for c in consumers:
            if c.thread.is_alive():
                c.thread.join(timeout=PHASE_TIMEOUT_S)
            elif c.thread.ident is None:  # created, never started: nothing polls it, close it here
                c.consumer.close()
    # a leave that never came (failed rep, or a poll that never returned): everything counts as forming
    if not leave_wall <= end_wall:
        leave_wall = end_wall
    _record_events(rep, group_events(log.read_new(), group), t0_wall, leave_wall, end_wall)
    return rep


async def _create_topic(port: int) -> None:
    conn = await KafkaConn.open(port)
    try:
        await conn.call(w.CREATE_TOPICS, w.CREATE_TOPICS_V, w.create_topic(TOPIC, PARTITIONS))
    finally:
        conn.close()


def run(quick: bool = False) -> dict:
    reps = 2 if quick else REPS
    clients = ["kafka-python", BASELINE]
    delays = leave_delays(reps, SETTLE_S, PHASE_WINDOW_S, seed=0)
    done: list[Rep] = []
    # INFO: the coordinator logs each rebalance it starts, with its reason (bench.e2e_log)
    with KcoordServer({"group.min.session.timeout.ms": "1000",
                       "group.initial.rebalance.delay.ms": str(INITIAL_REBALANCE_DELAY_MS)},
                      log_level="INFO") as server:
        arun(server.wait_ready())
        arun(_create_topic(server.port))
        log = LogTail(server.log_path)
        for i, delay in enumerate(delays):
            for client in clients if i % 2 == 0 else clients[::-1]:  # ABBA: linear drift hits both alike
                done.append(one_rep(server.port, client, f"e2e-{client}-{i}", delay, log))
    bugs = [r for r in done if r.client_bug]
    return {
        "name": "e2e",
        "settings": settings(
            reps=reps,
            consumers=CONSUMERS,
            leave_after_stable_s=f"{SETTLE_S}+0..{PHASE_WINDOW_S}",
            partitions=PARTITIONS,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            poll_ms=POLL_MS,
            initial_rebalance_delay_ms=INITIAL_REBALANCE_DELAY_MS,
            loadavg_at_end=round(os.getloadavg()[0], 2),
        ),
        "rows": summarize(done, BASELINE),
        "samples": [vars(r) for r in done],
        "notes": [
            f"times are {TRIM:.0%}-trimmed means (the mean of the middle {1 - 2 * TRIM:.0%} of reps, see "
            f"bench.e2e_stats.TRIM; medians in their own column), ratios against {BASELINE} consumers on the same server in the same run, reps "
            f"interleaved ABBA. Each rep forms a group of {CONSUMERS} (timed from the subscriptions; the clients are created first, outside the timing) "
            "and, after it has been stable a while, one consumer leaves (timed from its close()); stable is "
            "the moment the last client applied its assignment (rebalance callback). Leave phases are spread "
            "evenly over a window of several heartbeat intervals, the same for both clients.",
            "a failed rep keeps the event it timed before failing; the failed event has no time and is "
            "counted, as a client bug or as a failed rep, in the table.",
            f"each client polls with a {POLL_MS} ms timeout, as applications do (0.1-1 s). At 20 ms kafka-python "
            "3.0.12 drops a JoinGroup/SyncGroup that finished between two polls and joins again; when that is "
            "the leader, the coordinator starts another generation (as Kafka's does), so its form time depended "
            "on thread scheduling (0.24-1.6 s within a run, median ratio 1.2-2.1 across runs). See POLL_MS.",
            "'reps w/ extra rebalances' counts reps whose phase took more than the one rebalance it needs (the "
            "first join's, the LeaveGroup's), from the server's log; the notes below tally the extra ones' "
            "reasons. 'reps w/ write > ...' counts reps in which the server took that long from the leader's "
            "assignment to Stable, i.e. to write (fsync) the group's metadata; ~2 ms normally, stalls of "
            "0.1-2 s come from other work on the shared disk and hit either client at random. Each sample "
            "lists its phases' server events ([s into the phase, kind, generation, reason]).",
            "'ratio halves' are the same ratios from two halves of the reps alone (alternate reps in leave-"
            "phase order, so each half spans the whole window): the run's own repeatability check.",
            "kafka-python is pure Python and its ten consumers share one interpreter: when the machine is "
            "short of CPU (load average above the cores) its times grow and its ratios with them (measured: "
            "two busy loops on 2 cores took form 1.6 -> 2.6, leave 0.9 -> 1.9; librdkafka barely moved), so "
            "compare runs at similar load (loadavg_at_start / _at_end).",
            *form_stage_notes(done),
            *extra_rebalance_notes(done),
            *(f"failed rep: {r.failure}" for r in done if r.failure),
            *([f"{len(bugs)} failed reps are kafka-python's own abandoned join (see bench.e2e.abandoned_join), "
               "not a coordinator answer: the member stops sending requests."] if bugs else []),
        ],
    }


if __name__ == "__main__":
    main(run)
