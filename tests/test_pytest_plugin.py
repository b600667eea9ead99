"""The pytest plugin as an application's test suite sees it: a test file outside this project run by
its own pytest, with the plugin loaded by name (as the `pytest11` entry point loads it once installed)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.support.kcoord_server import ROOT

USER_TESTS = '''
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol import messages as m


def partitions_of(bootstrap, topic):
    with KafkaWireClient.connect(bootstrap) as client:
        req = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                                allow_auto_topic_creation=True)
        return len(client.request(req, 9).topics[0].partitions)


def test_defaults(kafka_broker):
    assert partitions_of(kafka_broker.bootstrap_servers, "a") == 1
    assert kafka_broker.faults.list() == []


@pytest.mark.kcoord(overrides={"num.partitions": "3"})
def test_marker_overrides(kafka_broker):
    assert partitions_of(kafka_broker.bootstrap_servers, "b") == 3


def test_factory(kafka_broker_factory):
    one, two = kafka_broker_factory(), kafka_broker_factory({"num.partitions": 2})
    assert one.bootstrap_servers != two.bootstrap_servers
    assert partitions_of(two.bootstrap_servers, "c") == 2


def test_kill_keeps_acknowledged_data_and_the_port(kafka_broker):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, acks="all")
    producer.send("d", b"survives").get(timeout=30)
    producer.close()
    before = kafka_broker.bootstrap_servers
    kafka_broker.kill()
    assert kafka_broker.bootstrap_servers == before
    consumer = KafkaConsumer(bootstrap_servers=before, auto_offset_reset="earliest", consumer_timeout_ms=10000)
    consumer.assign([TopicPartition("d", 0)])
    assert [r.value for r in consumer] == [b"survives"]
    consumer.close()


def test_restart_is_graceful_and_keeps_the_port(kafka_broker):
    before = kafka_broker.bootstrap_servers
    kafka_broker.restart()
    assert kafka_broker.bootstrap_servers == before and "kcoord stopped" in kafka_broker.log_text()


SEEN = []


@pytest.mark.parametrize("n", [1, 2])
def test_session_broker_is_shared(kafka_broker_session, n):
    SEEN.append(kafka_broker_session.bootstrap_servers)
    assert len(set(SEEN)) == 1


def test_a_failure_shows_the_server_log(kafka_broker):
    assert False, "on purpose"
'''


def test_plugin_fixtures_in_a_user_suite(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:kcoord", "-p", "kcoord.testkit.pytest_plugin",
                           "-p", "no:cacheprovider", "-q", "-rf", "-W", "ignore::DeprecationWarning", "test_user.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout
    assert "1 failed, 7 passed" in out, out + done.stderr
    assert "FAILED test_user.py::test_a_failure_shows_the_server_log" in out
    # the failing test's report carries its server's log
    assert "kcoord log 127.0.0.1:" in out and "kcoord ready: listening on 127.0.0.1:" in out
