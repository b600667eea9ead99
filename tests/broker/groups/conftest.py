"""Servers for the group integration tests (tests/broker/groups/group_server.py): one per module, or a
fresh one a test may restart, or one whose next __consumer_offsets write fails on request."""
from __future__ import annotations

import pytest

from kcoord.coordinator.runtime import FAULT_FILE_ENV
from tests.broker.groups.group_server import start_group_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server per test module (tests use their own group and topic names)."""
    srv = start_group_server(tmp_path_factory.mktemp("groups"), name="groups")
    yield srv
    srv.stop()


@pytest.fixture
def restartable_server(tmp_path):
    srv = start_group_server(tmp_path, name="restartable")
    yield srv
    srv.stop()


@pytest.fixture
def faulty_server(tmp_path):
    """A server whose next `__consumer_offsets` write fails whenever the test asks (the switch reaches the
    forked broker through its environment)."""
    fault_file = tmp_path / "fail-next-offsets-write"
    srv = start_group_server(tmp_path, name="faulty", env={FAULT_FILE_ENV: str(fault_file)})
    srv.fault_file = fault_file
    yield srv
    srv.stop()
