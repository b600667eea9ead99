"""The real server over TCP, with kafka-python: a start after a SIGTERM opens the store without
recovering a segment (Kafka's LogManager.loadLogs: "Skipping recovery ... since clean shutdown file
was found") and serves the same records and committed offsets; a start after a SIGKILL recovers
(the marker was deleted when the previous start loaded) and still serves every acknowledged record."""
import re

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

BOUND_S = 30
LOADED = re.compile(r"loaded (\d+) logs from \S+ \((clean shutdown|no clean shutdown)\): "
                    r"(\d+) segments opened from their indexes, (\d+) recovered")


def _produce(bootstrap: str, start: int, n: int) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
    futures = [producer.send("kept", key=b"k%d" % i, value=b"v%d" % i) for i in range(start, start + n)]
    producer.flush(BOUND_S)
    offsets = [f.get(BOUND_S).offset for f in futures]
    producer.close()
    return offsets


def _consume_all(bootstrap: str, expected: int) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    consumer.assign([TopicPartition("kept", 0)])
    consumer.seek_to_beginning()
    got: list[tuple[int, bytes]] = []
    for _ in range(60):
        got += [(r.offset, r.value) for rs in consumer.poll(timeout_ms=500).values() for r in rs]
        if len(got) >= expected:
            break
    consumer.close()
    return got


def _committed(bootstrap: str) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kept-group", enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition("kept", 0))
    finally:
        consumer.close()


def _last_load(server) -> tuple[str, int, int]:
    *_, last = LOADED.finditer(server.log_text())
    return last.group(2), int(last.group(3)), int(last.group(4))


def test_restarts_after_sigterm_skip_recovery_and_after_sigkill_recover(kcoord_server):
    server = kcoord_server
    assert _produce(server.bootstrap, 0, 150) == list(range(150))
    committer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="kept-group", enable_auto_commit=False)
    committer.commit({TopicPartition("kept", 0): OffsetAndMetadata(120, None)})
    committer.close()

    assert server.stop() == 0
    assert (server.data_dir / ".kafka_cleanshutdown").exists()
    server.start()
    assert not (server.data_dir / ".kafka_cleanshutdown").exists()  # deleted as the logs load
    how, trusted, recovered = _last_load(server)
    assert (how, recovered) == ("clean shutdown", 0) and trusted >= 2  # "kept-0" and __consumer_offsets-0
    assert _consume_all(server.bootstrap, 150) == [(i, b"v%d" % i) for i in range(150)]
    assert _committed(server.bootstrap) == 120

    assert _produce(server.bootstrap, 150, 50) == list(range(150, 200))
    server.kill()  # SIGKILL, then up again on the same data
    how, _, recovered = _last_load(server)
    assert how == "no clean shutdown" and recovered >= 1
    assert _consume_all(server.bootstrap, 200) == [(i, b"v%d" % i) for i in range(200)]
    assert _committed(server.bootstrap) == 120
