"""Acceptance: for every (message, version) we serve, our generated codec and kafka-python's codec
produce identical bytes for random messages, and each decodes the other's bytes to equal values."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol import messages as m
from kcoord.protocol.extra_definitions import DEFINITIONS
from kcoord.protocol.schema import load_spec
from tests.protocol.reference import (
    from_kafka_python,
    kafka_python_decode,
    kafka_python_encode,
    messages,
    to_kafka_python,
)

# Definitions kafka-python does not ship (protocol/extra_definitions.py): nothing to compare with, so they round-trip.
EXTRA = set(DEFINITIONS)


def _all_cases(extra: bool = False):
    names = [api + kind for api in m.SERVED_APIS for kind in ("Request", "Response")]
    names += list(m.DATA_MESSAGES)
    for name in names:
        if (name in EXTRA) != extra:
            continue
        low, high = load_spec(name).valid_versions
        for version in range(low, high + 1):
            yield pytest.param(name, version, id=f"{name}-v{version}")


CASES = list(_all_cases())
EXTRA_CASES = list(_all_cases(extra=True))


def test_every_group_api_version_the_issue_names_is_covered():
    covered = {(c.values[0], c.values[1]) for c in CASES}
    required = {"JoinGroup": range(0, 10), "SyncGroup": range(0, 6), "Heartbeat": range(0, 5),
                "LeaveGroup": range(0, 6), "FindCoordinator": range(0, 7), "OffsetCommit": range(2, 10),
                "OffsetFetch": range(1, 10)}
    for api, versions in required.items():
        for v in versions:
            assert (api + "Request", v) in covered and (api + "Response", v) in covered


@pytest.mark.parametrize(("name", "version"), CASES)
def test_same_bytes_as_kafka_python_both_ways(name, version):
    codec = m.codec(name, version)

    @settings(max_examples=12, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(ours=messages(name, version))
    def check(ours):
        ours_bytes = codec.encode(ours)
        theirs = to_kafka_python(ours, name, version)
        theirs_bytes = kafka_python_encode(theirs, version)
        assert ours_bytes == theirs_bytes
        # kafka-python decodes our bytes to the values we encoded ...
        assert from_kafka_python(kafka_python_decode(name, ours_bytes, version), name, version) == ours
        # ... and we decode kafka-python's bytes to the same values, consuming all of them.
        decoded, end = codec.decode(theirs_bytes)
        assert decoded == ours
        assert end == len(theirs_bytes)
        # A memoryview input (what the frame splitter hands out) decodes to equal values too.
        assert codec.decode(memoryview(theirs_bytes))[0] == ours

    check()


@pytest.mark.parametrize(("name", "version"), EXTRA_CASES)
def test_extra_definitions_round_trip(name, version):
    codec = m.codec(name, version)

    @settings(max_examples=12, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(ours=messages(name, version))
    def check(ours):
        raw = codec.encode(ours)
        decoded, end = codec.decode(raw)
        assert decoded == ours and end == len(raw)
        assert codec.encode(decoded) == raw

    check()


@pytest.mark.parametrize("name", [n for n in m.DATA_MESSAGES if n not in EXTRA])
def test_versioned_data_matches_kafka_python_with_its_version_prefix(name):
    low, high = load_spec(name).valid_versions

    @settings(max_examples=10, deadline=None, database=None)
    @given(data=st.data())
    def check(data):
        version = data.draw(st.integers(low, high))
        ours = data.draw(messages(name, version))
        raw = m.encode_versioned(name, ours, version)
        assert raw == kafka_python_encode(to_kafka_python(ours, name, version), version, header=True)
        assert m.decode_versioned(name, raw) == (ours, version)

    check()
