"""A REBOOTSTRAP_REQUIRED (129) fault on Metadata: the admin endpoint puts it in Metadata v13's top-level
ErrorCode (MetadataResponse.json, KIP-1102), and librdkafka >= 2.11 reacts by re-bootstrapping (its
rdkafka_metadata.c; librdkafka's tests/0152-rebootstrap_local.c looks for "Starting re-bootstrap sequence")."""
from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka.admin import AdminClient

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from tests.support.raw_kafka import RawKafka

ADMIN = {"kcoord.admin.listener": "http://127.0.0.1:0", "metrics.port": "0"}


@pytest.fixture
def server(kcoord_server_factory):
    return kcoord_server_factory(ADMIN)


def metadata(port: int, version: int):
    from tests.broker.test_every_advertised_version import call
    with RawKafka(port) as c:
        return call(c, 3, version, m.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                     include_topic_authorized_operations=False))


def test_fault_sets_metadata_v13_top_level_error(server):
    server.faults.add("Metadata", error="REBOOTSTRAP_REQUIRED", count=1)
    assert metadata(server.port, 13).error_code == ErrorCode.REBOOTSTRAP_REQUIRED
    assert metadata(server.port, 13).error_code == ErrorCode.NONE  # count 1: served again


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_librdkafka_rebootstraps_on_the_fault(server):
    handler = _Lines()
    logger = logging.getLogger("rdkafka-rebootstrap")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    with AdminClient({"bootstrap.servers": server.bootstrap, "debug": "generic,broker", "logger": logger}) as admin:
        admin.list_topics(timeout=10)
        server.faults.add("Metadata", error="REBOOTSTRAP_REQUIRED", count=3)
        try:
            admin.list_topics(timeout=5)
        except Exception:  # noqa: BLE001 - the request that hit the fault may fail; the reaction is what counts
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("re-bootstrap" in line for line in handler.lines):
            admin.poll(0.2)
        assert any("Starting re-bootstrap sequence" in line for line in handler.lines), handler.lines[-30:]
        server.faults.clear()  # how many of the 3 its re-bootstrap used up depends on timing
        admin.list_topics(timeout=10)  # and it recovers once the fault is gone
