"""Servers for the group integration tests (tests/broker/groups/group_server.py): one per module, or a
fresh one a test may restart."""
from __future__ import annotations

import pytest

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
