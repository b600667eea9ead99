"""The suite's server fixtures, a pytest plugin (tests/conftest.py lists it in `pytest_plugins`): thin
names over kcoord's own test kit (kcoord.testkit.pytest_plugin), so the suite starts brokers exactly as
users' tests do: forked from the session's launcher (~0.15 s), with the kit's one settings dict
(kcoord.testkit.broker_process.TEST_SETTINGS) under each test's overrides, the admin endpoint on.

- `kcoord_server`: a fresh broker per test (data in tmp_path); `kcoord_server_factory(overrides=None,
  name=...)` starts more, or with other properties. `kafka_broker_factory` with a CRC check.
- `kcoord_shared_server`: one broker for a whole test module, for read-mostly client tests.
- `kcoord_broker`: an in-process Broker on the test's event loop, for tests that reach into the broker
  (broker.hooks, its coordinators); the same settings, and `@pytest.mark.kcoord(overrides=...)`.
- `kcoord_plain_server`: a plain `kcoord serve` process (a fresh interpreter: tests/support/kcoord_server.py),
  only for tests whose subject is that process (its exit status after a signal).
Each checks, once its server stopped, every record batch in its data directory against crcmod's CRC-32C.
"""
from __future__ import annotations

import pytest

from kcoord.testkit.broker_process import TEST_SETTINGS
from kcoord.testkit.pytest_plugin import start_broker
from tests.support.crc_reference import batch_crc_mismatches
from tests.support.kcoord_server import KcoordServer


@pytest.fixture
def kcoord_server_factory(kafka_broker_factory):
    started: list = []

    def start(overrides: dict[str, str] | None = None, name: str | None = None):
        broker = kafka_broker_factory(overrides, name)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()
    for broker in started:  # every batch it wrote carries crcmod's CRC-32C
        assert batch_crc_mismatches(broker.data_dir) == []


@pytest.fixture
def kcoord_server(kcoord_server_factory):
    return kcoord_server_factory()


@pytest.fixture(scope="module")
def kcoord_shared_server(tmp_path_factory):
    server = start_broker(tmp_path_factory.mktemp("kcoord-shared"))
    yield server
    server.stop()
    assert batch_crc_mismatches(server.data_dir) == []


@pytest.fixture
def kcoord_plain_server(tmp_path):
    server = KcoordServer(tmp_path).start()
    yield server
    server.stop()
    assert batch_crc_mismatches(server.data_dir) == []


@pytest.fixture
async def kcoord_broker(request: pytest.FixtureRequest, tmp_path):
    """A Broker running in this test's event loop (listeners on an ephemeral port)."""
    from kcoord.broker.app import Broker
    from kcoord.broker.config import BrokerConfig

    marker = request.node.get_closest_marker("kcoord")
    overrides = (marker.kwargs.get("overrides") if marker is not None else None) or {}
    cfg = BrokerConfig.load(overrides={**TEST_SETTINGS, "listeners": "PLAINTEXT://127.0.0.1:0",
                                       "log.dirs": str(tmp_path / "data"), **overrides})
    broker = Broker(cfg)
    await broker.start()
    yield broker
    await broker.stop(timeout=5.0)
    assert batch_crc_mismatches(tmp_path / "data") == []
