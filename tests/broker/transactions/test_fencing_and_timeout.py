"""Real clients: a zombie producer is fenced, a hung transaction is aborted by the coordinator, and an
aborted transaction is invisible to read_committed consumers but visible to read_uncommitted ones.

Kafka's behaviour followed: TransactionCoordinator.handleInitProducerId (a second producer with the same
transactional id bumps the epoch; the first gets PRODUCER_FENCED / INVALID_PRODUCER_EPOCH from then on),
abortTimedOutTransactions (every transaction.abort.timed.out.transaction.cleanup.interval.ms, an Ongoing
transaction past its timeout is aborted with a bumped epoch, fencing its producer), and the
read_committed Fetch (the last stable offset and the aborted transactions list, KIP-98).
"""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

FAST_ABORT = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
              "transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"}


@pytest.fixture
def server(kcoord_server_factory):
    server = kcoord_server_factory(FAST_ABORT)
    with AdminClient({"bootstrap.servers": server.bootstrap}) as admin:
        for f in admin.create_topics([NewTopic("fence", 1), NewTopic("hung", 1), NewTopic("vis", 1)]).values():
            f.result(30)
    return server


@pytest.fixture
def producer(server):
    """`producer(txn_id, **conf)`: a transactional producer, initialized; each is closed before the server
    stops, on every path (a fenced or failed one too: purged first, so close() does not wait for it)."""
    made: list[Producer] = []

    def make(txn_id: str, **extra) -> Producer:
        p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": txn_id, **extra})
        made.append(p)
        p.init_transactions(30)
        return p

    yield make
    for p in made:
        p.purge()
        try:
            p.close()
        except KafkaException:  # a fenced producer's abort fails; close() destroys the handle all the same
            pass


def read_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{isolation}", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    values = []
    with consumer:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                break  # end of partition (up to the last stable offset for read_committed)
            values.append(msg.value())
    return values


def test_zombie_producer_is_fenced(server, producer):
    zombie = producer("fenced-id")
    zombie.begin_transaction()
    zombie.produce("fence", value=b"zombie")
    zombie.flush(10)
    successor = producer("fenced-id")  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce("fence", value=b"successor")
    successor.commit_transaction(30)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    assert read_values(server.bootstrap, "fence", "read_committed") == [b"successor"]
    assert read_values(server.bootstrap, "fence", "read_uncommitted") == [b"zombie", b"successor"]


def test_hung_transaction_is_aborted_by_its_timeout(server, producer):
    hung = producer("hung-id", **{"transaction.timeout.ms": 1000})
    hung.begin_transaction()
    hung.produce("hung", value=b"never committed")
    hung.flush(10)
    # Until the coordinator aborts it, the open transaction holds the last stable offset back.
    assert read_values(server.bootstrap, "hung", "read_committed") == []
    server.wait_for_log(r"aborting transaction hung-id .* past its timeout", timeout=20)
    with pytest.raises(KafkaException):
        hung.commit_transaction(10)  # fenced by the abort's epoch bump
    after = producer("other-id")
    after.begin_transaction()
    after.produce("hung", value=b"later")
    after.commit_transaction(30)
    assert read_values(server.bootstrap, "hung", "read_committed") == [b"later"]
    assert read_values(server.bootstrap, "hung", "read_uncommitted") == [b"never committed", b"later"]


def test_aborted_records_visible_only_to_read_uncommitted(server, producer):
    p = producer("vis-id")
    for values, commit in (([b"c1", b"c2"], True), ([b"a1", b"a2", b"a3"], False), ([b"c3"], True)):
        p.begin_transaction()
        for v in values:
            p.produce("vis", value=v)
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(10)
            p.abort_transaction(30)
    assert read_values(server.bootstrap, "vis", "read_committed") == [b"c1", b"c2", b"c3"]
    assert read_values(server.bootstrap, "vis", "read_uncommitted") == [b"c1", b"c2", b"a1", b"a2", b"a3", b"c3"]
    kcat = shutil.which("kcat")
    if kcat is not None:  # Debian's kcat (librdkafka 2.0) too
        def kcat_values(isolation: str) -> list[bytes]:
            run = subprocess.run([kcat, "-b", server.bootstrap, "-C", "-t", "vis", "-e", "-q", "-f", "%s\n",
                                  "-X", f"isolation.level={isolation}"], capture_output=True, timeout=60)
            assert run.returncode == 0, run.stderr
            return run.stdout.split()
        assert kcat_values("read_committed") == [b"c1", b"c2", b"c3"]
        assert kcat_values("read_uncommitted") == [b"c1", b"c2", b"a1", b"a2", b"a3", b"c3"]
