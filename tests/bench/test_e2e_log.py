"""Reading one group's rebalance events, their reasons and the server's write waits out of kcoord's INFO log."""

from __future__ import annotations

import pytest

from bench.e2e_log import (
    ASSIGNMENT,
    JOINED,
    REBALANCE,
    STABLE,
    Event,
    LogTail,
    between,
    group_events,
    log_time,
    rebalance_reasons,
    timeline,
    write_waits,
)

M1 = "bench-e2e-3cb82d31-2b4e-48ea-99a2-d40c3a7b512f"
M2 = "rdkafka-0e65586b-61f4-4807-8b31-e2638a79556e"
LOG = f"""\
2026-11-22 07:04:39,866 INFO kcoord.coordinator: Preparing to rebalance group g-0 in state PreparingRebalance \
with old generation 0 (__consumer_offsets-33) (reason: Adding new member {M1} with group instance id None; \
client reason: not provided)
2026-11-22 07:04:40,068 INFO kcoord.coordinator: Stabilized group g-0 generation 1 (__consumer_offsets-33) with 10 members
2026-11-22 07:04:40,069 INFO kcoord.coordinator: Assignment received from leader {M1} for group g-0 for generation 1. The group has 10 members, 0 of which are static.
2026-11-22 07:04:40,069 INFO kcoord.coordinator: Stabilized group g-10 generation 1 (__consumer_offsets-2) with 3 members
2026-11-22 07:04:40,102 INFO kcoord.coordinator: Group g-0 transitioned to Stable with generation 1 and 10 members
2026-11-22 07:04:40,070 INFO kcoord.coordinator: Preparing to rebalance group g-10 in state PreparingRebalance \
with old generation 0 (__consumer_offsets-2) (reason: Adding new member {M2} with group instance id None)
2026-11-22 07:04:40,118 INFO kcoord.coordinator: Preparing to rebalance group g-0 in state PreparingRebalance \
with old generation 1 (__consumer_offsets-33) (reason: Leader {M1} re-joining group during Stable; client reason: \
not provided)
2026-11-22 07:04:41,505 INFO kcoord.coordinator: Preparing to rebalance group g-0 in state PreparingRebalance \
with old generation 2 (__consumer_offsets-33) (reason: Removing member {M2} on LeaveGroup; client reason: gone)
"""


def test_only_the_groups_own_events_with_member_ids_and_empty_client_reasons_dropped():
    found = group_events(LOG, "g-0")
    assert [(e.kind, e.generation, e.reason) for e in found] == [
        (REBALANCE, 0, "Adding new member <member> with group instance id None"),
        (JOINED, 1, ""),
        (ASSIGNMENT, 1, ""),
        (STABLE, 1, ""),
        (REBALANCE, 1, "Leader <member> re-joining group during Stable"),
        (REBALANCE, 2, "Removing member <member> on LeaveGroup; client reason: gone"),
    ]
    assert found[4].at - found[0].at == pytest.approx(0.252)
    assert [e.kind for e in group_events(LOG, "g-10")] == [JOINED, REBALANCE]  # log order; not g-1's
    assert group_events(LOG, "g-1") == []


def test_reasons_and_write_waits_read_from_a_timeline():
    t = timeline(group_events(LOG, "g-0"), origin=log_time("2026-11-22 07:04:39,866"))
    assert rebalance_reasons(t)[1] == "Leader <member> re-joining group during Stable"
    assert write_waits(t) == [pytest.approx(0.033)]  # assignment at ,069, Stable at ,102
    assert write_waits([[0.5, STABLE, 2, ""]]) == []  # its assignment fell in an earlier phase


def test_log_time_reads_asctime_on_the_wall_clock_scale():
    assert log_time("2026-11-22 07:04:40,118") - log_time("2026-11-22 07:04:39,866") == pytest.approx(0.252)


def test_between_moves_both_bounds_back_by_the_stamps_millisecond_truncation():
    found = [Event(10.000, REBALANCE, 0, "a"), Event(10.4995, REBALANCE, 1, "b"), Event(11.0, STABLE, 2)]
    assert [r.reason for r in between(found, 10.0005, 11.0)] == ["a", "b"]  # "a" may be 10.0009 really
    assert between(found, 10.002, 10.4) == []
    # "b" may really be 10.5003: stamped before a phase boundary at 10.5, it counts after it, not before
    assert [r.reason for r in between(found, 10.0, 10.5)] == ["a"]
    assert [r.generation for r in between(found, 10.5, 12.0)] == [1, 2]


def test_timeline_is_relative_to_the_origin():
    assert timeline([Event(10.25, REBALANCE, 1, "x")], origin=10.0) == [[0.25, REBALANCE, 1, "x"]]


def test_log_tail_returns_each_complete_line_once(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("one\ntw")
    tail = LogTail(path)
    assert tail.read_new() == "one\n"
    with open(path, "a") as f:
        f.write("o\nthree\n")
    assert tail.read_new() == "two\nthree\n"
    assert tail.read_new() == ""
