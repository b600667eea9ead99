"""The guard tests/conftest.py runs after every test (tests/support/client_leaks.py): a client still
running is reported, with what holds it, until it is closed. The clients point at a closed port and
never connect; librdkafka's logging is off so the refused connections print nothing."""
from __future__ import annotations

import pytest

from tests.support import client_leaks

NOWHERE = "127.0.0.1:9"


def test_a_librdkafka_client_is_reported_until_it_is_closed():
    ck = pytest.importorskip("confluent_kafka")
    before = client_leaks.snapshot()
    producer = ck.Producer({"bootstrap.servers": NOWHERE, "log_level": 0})
    (report,) = client_leaks.leaked_since(before)
    # held by: this frame, which gc cannot see while it runs (the guard looks once the test is over)
    assert report.startswith("1 librdkafka handle(s) still running: Producer held by ")
    producer.close()
    assert client_leaks.leaked_since(before) == []


def test_a_kafka_python_producer_is_reported_until_it_is_closed():
    kafka = pytest.importorskip("kafka")
    before = client_leaks.snapshot()
    producer = kafka.KafkaProducer(bootstrap_servers=NOWHERE, api_version=(3, 0), client_id="leak-check")
    assert client_leaks.leaked_since(before) == ["kafka-python thread 'leak-check-network-thread' still running"]
    producer.close(5)
    assert client_leaks.leaked_since(before) == []
