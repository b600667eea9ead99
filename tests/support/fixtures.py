"""pytest fixtures for tests that need a kcoord server (import them from a conftest.py).

- `kcoord_server`: a fresh real server subprocess per test (data in tmp_path).
- `kcoord_server_factory(overrides=None, name=...)`: start more, or with other properties.
- `kcoord_shared_server`: one server for a whole test module, for read-mostly client tests.
- `kcoord_broker`: an in-process Broker on the test's event loop, for tests that use broker.hooks.
Each checks, once its server stopped, every record batch in its data directory against crcmod's CRC-32C.
"""
from __future__ import annotations

import pytest

from tests.support.crc_reference import batch_crc_mismatches
from tests.support.kcoord_server import KcoordServer

# Fast group formation for tests; a test can override it.
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def kcoord_server_factory(tmp_path):
    started: list[KcoordServer] = []

    def start(overrides: dict[str, str] | None = None, name: str | None = None) -> KcoordServer:
        props = dict(TEST_DEFAULTS, **(overrides or {}))
        server = KcoordServer(tmp_path, props, name=name or f"kcoord{len(started)}")
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
    for server in started:  # every batch it wrote carries crcmod's CRC-32C
        assert batch_crc_mismatches(server.data_dir) == []


@pytest.fixture
def kcoord_server(kcoord_server_factory) -> KcoordServer:
    return kcoord_server_factory()


@pytest.fixture(scope="module")
def kcoord_shared_server(tmp_path_factory):
    server = KcoordServer(tmp_path_factory.mktemp("kcoord-shared"), dict(TEST_DEFAULTS)).start()
    yield server
    server.stop()
    assert batch_crc_mismatches(server.data_dir) == []


@pytest.fixture
async def kcoord_broker(tmp_path):
    """A Broker running in this test's event loop (listeners on an ephemeral port)."""
    from kcoord.broker.app import Broker
    from kcoord.broker.config import BrokerConfig

    cfg = BrokerConfig.load(overrides={"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
                                       **TEST_DEFAULTS})
    broker = Broker(cfg)
    await broker.start()
    yield broker
    await broker.stop(timeout=5.0)
    assert batch_crc_mismatches(tmp_path / "data") == []
