"""The registry is the one source of truth for what we advertise."""
from __future__ import annotations

import re
import sys

from kcoord.broker import registry
from kcoord.protocol import messages as m


def test_every_api_module_registers_a_range_kafka_defines():
    served = registry.served()
    assert {s.key for s in served} >= {0, 1, 2, 3, 18, 19, 20, 22, 32, 60}
    for spec in served:
        lo, hi = m.api_versions_range(spec.key)
        assert lo <= spec.min_version <= spec.max_version <= hi, spec


def test_every_api_module_documents_each_version_it_serves():
    for spec in registry.served():
        doc = sys.modules[spec.handler.__module__].__doc__ or ""
        listed = {int(v) for v in re.findall(r"^\s+v(\d+):", doc, flags=re.M)}
        missing = set(range(spec.min_version, spec.max_version + 1)) - listed
        assert not missing, f"{spec.name}: versions {sorted(missing)} not described in its docstring"


def test_api_versions_ranges_satisfy_all_five_clients():
    # real-clients.md 1.4: the versions each client needs to find inside our range.
    need = {18: [0, 2, 3], 3: [4, 5, 6], 0: [3, 7], 1: [4, 11], 2: [1, 2, 3], 22: [0, 1, 4]}
    for key, versions in need.items():
        spec = registry.lookup(key)
        for v in versions:
            assert spec.supports(v), (spec.name, v)
