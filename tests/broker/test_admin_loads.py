"""The admin endpoint's coordinator controls (/coordinator/*, /transactions/*), routed without sockets:
each calls the runtime's plain method; bad input is a 4xx and calls nothing."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kcoord.broker.admin_http import AdminApi


class Runtime:
    def __init__(self) -> None:
        self.calls: list = []
        self.held: set[int] = set()

    def hold_load(self, partitions):
        self.calls.append(("hold", partitions))
        self.held.update(partitions)
        return sorted(self.held)

    def release_load(self, partitions=None):
        self.calls.append(("release", partitions))
        self.held -= set(self.held if partitions is None else partitions)
        return sorted(self.held)

    def reload(self):
        self.calls.append(("reload",))
        return 3

    def fail_offsets_writes(self, count):
        self.calls.append(("fail", count))
        return count


def call(api: AdminApi, method: str, path: str, body=None):
    return api.handle(method, path, b"" if body is None else json.dumps(body).encode())


def test_each_route_calls_its_runtime():
    groups, transactions = Runtime(), Runtime()
    api = AdminApi(SimpleNamespace(group_coordinator=groups, txn_coordinator=transactions, faults=None))
    assert call(api, "POST", "/coordinator/hold-load", {"partitions": [2, 5]}) == (200, {"held": [2, 5]})
    assert call(api, "POST", "/coordinator/release-load", {"partitions": [5]}) == (200, {"held": [2]})
    assert call(api, "POST", "/coordinator/reload") == (200, {"partitions": 3})
    assert call(api, "POST", "/coordinator/release-load", {}) == (200, {"held": []})
    assert call(api, "POST", "/coordinator/fail-offsets-writes") == (200, {"failing": 1})
    assert call(api, "POST", "/transactions/hold-load", {"partitions": [1]}) == (200, {"held": [1]})
    assert groups.calls == [("hold", [2, 5]), ("release", [5]), ("reload",), ("release", None), ("fail", 1)]
    assert transactions.calls == [("hold", [1])]


@pytest.mark.parametrize("method, path, body, status", [
    ("GET", "/coordinator/hold-load", None, 405),
    ("POST", "/coordinator/hold-load", {}, 400),
    ("POST", "/coordinator/hold-load", {"partitions": ["1"]}, 400),
    ("POST", "/coordinator/release-load", {"partitions": [-1]}, 400),
    ("POST", "/coordinator/reload", {"now": True}, 400),
    ("POST", "/coordinator/fail-offsets-writes", {"count": 0}, 400),
    ("POST", "/transactions/fail-offsets-writes", {}, 404),
])
def test_bad_input_calls_nothing(method, path, body, status):
    groups = Runtime()
    api = AdminApi(SimpleNamespace(group_coordinator=groups, txn_coordinator=groups, faults=None))
    assert call(api, method, path, body)[0] == status
    assert groups.calls == []
