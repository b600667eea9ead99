"""Share groups (KIP-932) end to end with confluent-kafka's ShareConsumer (librdkafka 2.16) over TCP:
queue semantics on one partition shared by several consumers, explicit acknowledgement (release comes
back with delivery count 2, reject never), a consumer SIGKILLed while holding records, kcoord SIGKILLed
and restarted under a share group, and classic / consumer / share groups side by side on one topic."""
from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer  # noqa: E402

from tests.broker.groups.group_server import start_group_server  # noqa: E402
from tests.broker.share.test_share_fetch_wire import earliest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LOCK_MS = 2000  # group.share.record.lock.duration.ms here: a killed consumer's records come back soon


@pytest.fixture
def server(tmp_path):
    srv = start_group_server(tmp_path, name="share-e2e", overrides={
        "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": str(LOCK_MS)})
    yield srv
    srv.stop()


def produce(bootstrap: str, topic: str, count: int, start: int = 0, pause_every: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce(topic, value=str(i).encode())
        if pause_every and i % pause_every == pause_every - 1:
            producer.flush(30)
            time.sleep(0.05)
    assert producer.flush(30) == 0


def share_consumer(bootstrap: str, group: str, topic: str, explicit: bool = False, **extra) -> ShareConsumer:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"share-{group}", **extra}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(config)
    consumer.subscribe([topic])
    return consumer


def poll_until(consumer: ShareConsumer, done, timeout_s: float = 60.0, explicit_ack=None) -> list:
    """Poll until `done(all messages so far)`; in explicit mode `explicit_ack(msg)` acknowledges each."""
    got: list = []
    deadline = time.monotonic() + timeout_s
    while not done(got) and time.monotonic() < deadline:
        messages = [msg for msg in consumer.poll(0.5) if msg.error() is None]
        if explicit_ack is not None:
            for msg in messages:
                consumer.acknowledge(msg, explicit_ack(msg))
            if messages:
                consumer.commit_sync()
        got += messages
    return got


def consume(bootstrap: str, group: str, topic: str, done, timeout_s: float, explicit_ack=None) -> list:
    """A new share consumer's poll_until, then its close (explicit mode when `explicit_ack` is given)."""
    consumer = share_consumer(bootstrap, group, topic, explicit=explicit_ack is not None)
    try:
        return poll_until(consumer, done, timeout_s, explicit_ack)
    finally:
        consumer.close()


def test_three_share_consumers_one_partition_with_a_producer_running(server):
    """Three share consumers on a one-partition topic (more consumers than partitions) consume 10,000
    records while a producer writes them: every record delivered, none to two consumers (implicit
    acknowledgement: each delivered once), the work spread over all three (long polls wake first come,
    first served, as Kafka's purgatory tries its watchers in order)."""
    topic, group, total = "queue", "queue-workers", 10_000
    server.create_topic(topic, 1)
    earliest(server, group)
    deliveries: dict[int, list] = collections.defaultdict(list)  # value -> [(consumer, delivery count)]
    lock, stop = threading.Lock(), threading.Event()

    def consume(index: int) -> None:
        consumer = share_consumer(server.bootstrap, group, topic)
        try:
            while not stop.is_set():
                for msg in consumer.poll(0.3):
                    if msg.error() is None:
                        with lock:
                            deliveries[int(msg.value())].append((index, msg.delivery_count()))
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        produce(server.bootstrap, topic, total, pause_every=100)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with lock:
                if len(deliveries) == total:
                    break
            time.sleep(0.2)
        with lock:
            snapshot = {v: list(d) for v, d in deliveries.items()}
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert sorted(snapshot) == list(range(total))
    twice = {v: d for v, d in snapshot.items() if len(d) > 1}
    assert not twice, f"{len(twice)} records delivered more than once, e.g. {list(twice.items())[:5]}"
    per_consumer = collections.Counter(d[0][0] for d in snapshot.values())
    # every consumer did a fair part of the work: waiting share fetches take turns at new records
    assert sorted(per_consumer) == [0, 1, 2] and min(per_consumer.values()) >= total // 10, per_consumer
    assert {count for d in snapshot.values() for _c, count in d} == {1}


def test_explicit_release_comes_back_reject_never(server):
    """Explicit acknowledgement: RELEASE makes a record available again (delivered next with delivery
    count 2), REJECT archives it, ACCEPT settles it (SharePartition.acknowledge)."""
    topic, group = "explicit", "explicit-acks"
    server.create_topic(topic, 1)
    earliest(server, group)
    produce(server.bootstrap, topic, 30)
    consumer = share_consumer(server.bootstrap, group, topic, explicit=True)
    try:
        kinds = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT, 2: AcknowledgeType.ACCEPT}
        first = poll_until(consumer, lambda got: len(got) >= 30,
                           explicit_ack=lambda msg: kinds[msg.offset() % 3] if msg.delivery_count() == 1
                           else AcknowledgeType.ACCEPT)
        firsts = [m.offset() for m in first if m.delivery_count() == 1]
        assert sorted(firsts) == list(range(30))
        again = poll_until(consumer, lambda got: len(got) >= 10, timeout_s=15,
                           explicit_ack=lambda msg: AcknowledgeType.ACCEPT)
        seconds = sorted((m.offset(), m.delivery_count()) for m in first + again if m.delivery_count() > 1)
        assert seconds == [(o, 2) for o in range(0, 30, 3)]
        assert not poll_until(consumer, lambda got: False, timeout_s=3)  # rejected ones never come back
    finally:
        consumer.close()


def start_worker(server, group: str, topic: str, accept: int) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.broker.share.share_worker", server.bootstrap, group,
                             topic, str(accept)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "src"), ROOT])})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail("the share worker printed nothing")
    return proc, json.loads(line)


def stop_for_good(worker: subprocess.Popen) -> None:
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)


def test_sigkilled_consumer_records_come_back_when_its_connection_closes(server):
    """A consumer SIGKILLed while holding acquired records: its connection closes, which ends its share
    session and releases what it held at once (ShareSessionCache's ConnectionDisconnectListener ->
    ShareGroupListener.onMemberLeave -> SharePartition.releaseAcquiredRecords, the delivery count taken
    back), long before the group's 60 s lock would; what it accepted never comes back."""
    topic, group = "killed", "killed-consumer"
    server.create_topic(topic, 1)
    earliest(server, group, share_record_lock_duration_ms="60000")
    produce(server.bootstrap, topic, 20)
    worker, report = start_worker(server, group, topic, accept=5)
    stop_for_good(worker)
    assert report["accepted"] == list(range(5)) and [o for o, _c in report["held"]] == list(range(5, 20))
    # within 30 s: the 60 s locks cannot have run out (delivery count 1: taken back, not expired)
    got = consume(server.bootstrap, group, topic, lambda got: len(got) >= 15, timeout_s=30)
    assert sorted((m.offset(), m.delivery_count()) for m in got) == [(o, 1) for o in range(5, 20)]


def test_paused_consumer_records_redelivered_after_the_lock(server):
    """A consumer SIGSTOPped while holding acquired records keeps its connection: after
    group.share.record.lock.duration.ms (2 s here) the locks run out (SharePartition.
    releaseAcquisitionLockOnTimeout) and another consumer gets the records with delivery count 2."""
    topic, group = "paused", "paused-consumer"
    server.create_topic(topic, 1)
    earliest(server, group)
    produce(server.bootstrap, topic, 20)
    worker, report = start_worker(server, group, topic, accept=5)
    worker.send_signal(signal.SIGSTOP)
    try:
        got = consume(server.bootstrap, group, topic, lambda got: len(got) >= 15, timeout_s=30)
    finally:
        stop_for_good(worker)
    assert sorted((m.offset(), m.delivery_count()) for m in got) == [(o, 2) for o in range(5, 20)]


def test_timer_control_expires_a_paused_consumers_locks_now(server):
    """The test kit's timer control (admin endpoint POST /share/expire-locks): with a 60 s lock for the
    group (share.record.lock.duration.ms), a paused consumer's records go to another consumer at once,
    with delivery count 2 (SharePartition.releaseAcquisitionLockOnTimeout run early)."""
    topic, group = "timer-control", "timer-share"
    server.create_topic(topic, 1)
    earliest(server, group, share_record_lock_duration_ms="60000")
    produce(server.bootstrap, topic, 10)
    worker, report = start_worker(server, group, topic, accept=0)
    worker.send_signal(signal.SIGSTOP)
    try:
        assert [o for o, _c in report["held"]] == list(range(10))
        assert server.timers.expire_share_locks(group) == 1
        # within 20 s: not the 60 s lock's own expiry
        got = consume(server.bootstrap, group, topic, lambda got: len(got) >= 10, timeout_s=20)
    finally:
        stop_for_good(worker)
    assert sorted((m.offset(), m.delivery_count()) for m in got) == [(o, 2) for o in range(10)]


def test_released_past_the_delivery_limit_is_archived(server):
    """A record released on every delivery comes back until group.share.delivery.count.limit (5) deliveries,
    then is archived and never delivered again (InFlightState.tryUpdateState)."""
    topic, group = "poison", "poison-share"
    server.create_topic(topic, 1)
    earliest(server, group)
    produce(server.bootstrap, topic, 3)
    got = consume(server.bootstrap, group, topic, lambda got: False, timeout_s=8,
                  explicit_ack=lambda msg: AcknowledgeType.RELEASE)
    counts = collections.defaultdict(list)
    for msg in got:
        counts[msg.offset()].append(msg.delivery_count())
    assert dict(counts) == {o: [1, 2, 3, 4, 5] for o in range(3)}


def test_kcoord_sigkilled_acknowledged_not_redelivered(server):
    """kcoord SIGKILLed and restarted under a share group while a (paused) consumer holds records: the
    share-partition is loaded back from __share_group_state (ShareSnapshot / ShareUpdate replay):
    accepted records are never delivered again, the acquired-but-unacknowledged ones are; the group's
    start offset survives."""
    topic, group = "crash", "crash-share"
    server.create_topic(topic, 1)
    earliest(server, group)
    produce(server.bootstrap, topic, 40)
    worker, report = start_worker(server, group, topic, accept=25)
    worker.send_signal(signal.SIGSTOP)
    try:
        assert report["accepted"] == list(range(25))
        server.restart(signal.SIGKILL)
    finally:
        stop_for_good(worker)
    consumer = share_consumer(server.bootstrap, group, topic)
    try:
        got = poll_until(consumer, lambda got: len(got) >= 15, timeout_s=30)
        assert sorted(m.offset() for m in got) == list(range(25, 40))
        assert not poll_until(consumer, lambda got: False, timeout_s=3)
    finally:
        consumer.close()


def test_read_committed_never_delivers_aborted_records(server):
    """share.isolation.level=read_committed: a share group reads below the last stable offset and archives
    the batches of aborted transactions and the markers (SharePartition.acquire with the fetched aborted
    transactions, ShareFetchUtils); only committed records are delivered."""
    topic, group = "transactional", "committed-only"
    server.create_topic(topic, 1)
    earliest(server, group, share_isolation_level="read_committed")
    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "share-txn"})
    producer.init_transactions(30)
    for n, commit in enumerate((True, False, True, False, True)):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=f"{'commit' if commit else 'abort'}-{n}-{i}".encode())
        assert producer.flush(30) == 0  # in the log before the abort (an abort drops what is not sent)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    consumer = share_consumer(server.bootstrap, group, topic)
    try:
        got = poll_until(consumer, lambda got: len(got) >= 30, timeout_s=30)
        got += poll_until(consumer, lambda got: False, timeout_s=3)
    finally:
        consumer.close()
    values = sorted(m.value().decode() for m in got)
    assert values == sorted(f"commit-{n}-{i}" for n in (0, 2, 4) for i in range(10))


def test_classic_consumer_and_share_groups_side_by_side(server):
    """One topic read by a classic group (kafka-python), a consumer-protocol group (KIP-848,
    confluent-kafka) and a share group (ShareConsumer): each reads every record."""
    from kafka import KafkaConsumer

    topic, total = "side-by-side", 50
    server.create_topic(topic, 1)
    earliest(server, "side-share")
    produce(server.bootstrap, topic, total)
    share = share_consumer(server.bootstrap, "side-share", topic)
    modern = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "side-consumer",
                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    modern.subscribe([topic])
    classic = KafkaConsumer(topic, bootstrap_servers=server.bootstrap, group_id="side-classic",
                            auto_offset_reset="earliest", consumer_timeout_ms=20000)
    classic.partitions_for_topic(topic)  # its metadata before the first join: see tests/test_example_app.py's App
    try:
        shared = poll_until(share, lambda got: len(got) >= total)
        modern_got: list = []
        deadline = time.monotonic() + 60
        while len(modern_got) < total and time.monotonic() < deadline:
            msg = modern.poll(0.5)
            if msg is not None and msg.error() is None:
                modern_got.append(msg.offset())
        classic_got = []
        for record in classic:
            classic_got.append(record.offset)
            if len(classic_got) >= total:
                break
    finally:
        share.close()
        modern.close()
        classic.close()
    assert sorted(m.offset() for m in shared) == list(range(total))
    assert sorted(modern_got) == list(range(total))
    assert sorted(classic_got) == list(range(total))


def test_kcoord_groups_lists_and_describes_a_share_group(server):
    """`kcoord groups list` shows a share group; `describe` gives kafka-share-groups.sh's columns: START-OFFSET
    and LAG per share-partition (DescribeShareGroupOffsets), then each member and its assignment."""
    from tests.broker.groups.test_admin_and_cli import kcoord_groups

    topic, group = "described", "described-share"
    server.create_topic(topic, 1)
    earliest(server, group)
    produce(server.bootstrap, topic, 30)
    consumer = share_consumer(server.bootstrap, group, topic, explicit=True)
    try:
        got = poll_until(consumer, lambda got: len(got) >= 30, explicit_ack=lambda msg: AcknowledgeType.ACCEPT
                         if msg.offset() < 20 else AcknowledgeType.RELEASE)
        assert len(got) >= 30
        listed = kcoord_groups(server.bootstrap, "list")
        assert listed.returncode == 0 and group in listed.stdout.split(), listed.stdout + listed.stderr
        out = kcoord_groups(server.bootstrap, "describe", group)
        assert out.returncode == 0, out.stderr
        lines = [line.split() for line in out.stdout.splitlines() if line.strip()]
        assert ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"] in lines, out.stdout
        assert [group, topic, "0", "20", "10"] in lines, out.stdout
        member = next(line for line in lines if line[:1] == [group] and line[-1] == f"{topic}:0")
        assert member[3:5] == [f"share-{group}", "1"], out.stdout
    finally:
        consumer.close()


@pytest.mark.parametrize("fault", [
    {"api": "ShareFetch", "action": "close", "count": 1},
    {"api": "ShareAcknowledge", "action": "error", "error": "SHARE_SESSION_NOT_FOUND", "count": 1},
    {"api": "ShareFetch", "action": "error", "error": "INVALID_SHARE_SESSION_EPOCH", "count": 1},
], ids=["fetch-connection-closed", "acknowledge-session-not-found", "fetch-invalid-epoch"])
def test_share_consumer_survives_injected_faults(server, fault):
    """The test kit's faults on ShareFetch / ShareAcknowledge (admin endpoint, kcoord.broker.faults): a
    connection closed on the first ShareFetch, a session the broker no longer knows on a ShareAcknowledge,
    an epoch it refuses -- the share consumer opens a new session and every record is still
    delivered (none lost; a released one may come again)."""
    topic, group = f"faulty-{fault['api']}-{fault.get('error', 'close')}".lower(), f"faulty-{id(fault)}"
    server.create_topic(topic, 1)
    earliest(server, group)
    server.faults.add(**fault)
    try:
        produce(server.bootstrap, topic, 200, pause_every=50)
        got = consume(server.bootstrap, group, topic, lambda got: {m.offset() for m in got} >= set(range(200)),
                      timeout_s=60, explicit_ack=lambda msg: AcknowledgeType.ACCEPT)
        faults = server.faults.list()
        fired = sum(f.get("fired", 0) for f in faults)
    finally:
        server.faults.clear()
    assert {m.offset() for m in got} == set(range(200))
    assert fired == 1, json.dumps(faults)


def test_acknowledged_records_survive_repeated_kcoord_crashes(tmp_path):
    """Nemesis: kcoord SIGKILLed and restarted twice while a share consumer accepts records (commit_sync per
    poll; at most 100 records in flight: group.share.partition.max.record.locks) from records already in the
    log. Checker: no record is delivered again after the broker confirmed its acknowledgement (written to
    __share_group_state before the answer), and every record is eventually acknowledged. The history is
    printed when the check fails."""
    topic, group, total = "crashing", "crash-loop", 2000
    server = start_group_server(tmp_path, name="share-crashes", overrides={
        "group.share.partition.max.record.locks": "100"})
    server.create_topic(topic, 1)
    earliest(server, group)
    produce(server.bootstrap, topic, total)
    history: list[tuple[float, str, int]] = []  # (time, "delivered" | "acknowledged", offset)
    confirmed: set[int] = set()
    stop = threading.Event()

    def consume() -> None:
        consumer = share_consumer(server.bootstrap, group, topic, explicit=True, **{"socket.timeout.ms": 5000})
        try:
            while not stop.is_set() and len(confirmed) < total:
                try:
                    messages = [msg for msg in consumer.poll(0.3) if msg.error() is None]
                except Exception:  # the broker went away mid-call: try again
                    continue
                for msg in messages:
                    history.append((time.monotonic(), "delivered", msg.offset()))
                    consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
                if not messages:
                    continue
                time.sleep(0.02)  # processing
                try:
                    results = consumer.commit_sync(10)
                except Exception:
                    continue
                if all(error is None for error in results.values()):
                    now = time.monotonic()
                    for msg in messages:
                        history.append((now, "acknowledged", msg.offset()))
                        confirmed.add(msg.offset())
        finally:
            consumer.close()

    worker = threading.Thread(target=consume)
    worker.start()
    crashed_at = []  # how many acknowledgements were confirmed when each crash came
    try:
        for _crash in range(2):
            wait_for = len(confirmed) + 500
            deadline = time.monotonic() + 60
            while len(confirmed) < min(wait_for, total) and time.monotonic() < deadline:
                time.sleep(0.05)
            crashed_at.append(len(confirmed))
            server.restart(signal.SIGKILL)
        deadline = time.monotonic() + 90
        while len(confirmed) < total and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        worker.join(60)
        server.stop()
    acknowledged_at: dict[int, float] = {}
    violations = []
    for at, what, offset in history:
        if what == "acknowledged":
            acknowledged_at.setdefault(offset, at)
        elif offset in acknowledged_at and at > acknowledged_at[offset]:
            violations.append((offset, acknowledged_at[offset], at))
    assert not violations, f"redelivered after a confirmed acknowledgement: {violations[:10]}\\n{history}"
    assert confirmed == set(range(total)), f"{total - len(confirmed)} never acknowledged\\n{history[-50:]}"
