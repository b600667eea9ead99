"""testkit/launcher.py: brokers forked from one interpreter are real processes of their own (SIGKILL is a
crash, their data survives it) and do not outlive their launcher."""
from __future__ import annotations

import os
import time

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.testkit.broker_process import BrokerProcess
from kcoord.testkit.launcher import Launcher


@pytest.fixture
def launcher():
    started = Launcher()
    yield started
    started.close()


def gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.01)
    return False


def test_forked_brokers_serve_and_are_separate_processes(tmp_path, launcher):
    one = BrokerProcess(tmp_path / "a", launcher=launcher).start()
    two = BrokerProcess(tmp_path / "b", launcher=launcher).start()
    assert len({one.pid, two.pid, os.getpid()}) == 3
    for broker in (one, two):
        with KafkaWireClient.connect(broker.bootstrap_servers) as client:
            assert client.api_versions()
    pid = one.pid
    one.kill(restart=False)
    assert gone(pid) and not one.running and two.running
    two.stop()
    assert "kcoord stopped" in two.log_text()  # SIGTERM reached its graceful shutdown


def test_a_killed_broker_restarts_on_its_data(tmp_path, launcher):
    broker = BrokerProcess(tmp_path, launcher=launcher).start()
    topic = m.CreateTopicsRequest.CreatableTopic(name="kept", num_partitions=2, replication_factor=1)
    with KafkaWireClient.connect(broker.bootstrap_servers) as client:
        assert client.request(m.CreateTopicsRequest(topics=[topic], timeout_ms=5000), 5).topics[0].error_code == 0
    first_pid = broker.pid
    broker.kill()
    assert broker.pid != first_pid and gone(first_pid)
    with KafkaWireClient.connect(broker.bootstrap_servers) as client:
        req = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name="kept")],
                                allow_auto_topic_creation=False)
        assert len(client.request(req, 9).topics[0].partitions) == 2
    broker.stop()


def test_brokers_die_with_their_launcher(tmp_path):
    launcher = Launcher()
    broker = BrokerProcess(tmp_path, launcher=launcher).start()
    launcher.close()
    assert gone(broker.pid)
