"""Reading the rebalances of one group, and their reasons, out of kcoord's INFO log."""

from __future__ import annotations

import pytest

from bench.e2e_log import LogTail, Rebalance, between, log_time, rebalances, timeline

M1 = "bench-e2e-3cb82d31-2b4e-48ea-99a2-d40c3a7b512f"
M2 = "rdkafka-0e65586b-61f4-4807-8b31-e2638a79556e"
LOG = f"""\
2026-11-22 07:04:39,866 INFO kcoord.coordinator: Preparing to rebalance group g-0 in state PreparingRebalance \
with old generation 0 (__consumer_offsets-33) (reason: Adding new member {M1} with group instance id None; \
client reason: not provided)
2026-11-22 07:04:40,068 INFO kcoord.coordinator: Stabilized group g-0 generation 1 (__consumer_offsets-33) with 10 members
2026-11-22 07:04:40,070 INFO kcoord.coordinator: Preparing to rebalance group g-10 in state PreparingRebalance \
with old generation 0 (__consumer_offsets-2) (reason: Adding new member {M2} with group instance id None)
2026-11-22 07:04:40,118 INFO kcoord.coordinator: Preparing to rebalance group g-0 in state PreparingRebalance \
with old generation 1 (__consumer_offsets-33) (reason: Leader {M1} re-joining group during Stable; client reason: \
not provided)
2026-11-22 07:04:41,505 INFO kcoord.coordinator: Preparing to rebalance group g-0 in state PreparingRebalance \
with old generation 2 (__consumer_offsets-33) (reason: Removing member {M2} on LeaveGroup; client reason: gone)
"""


def test_only_the_groups_own_rebalances_with_member_ids_and_empty_client_reasons_dropped():
    found = rebalances(LOG, "g-0")
    assert [(r.old_generation, r.reason) for r in found] == [
        (0, "Adding new member <member> with group instance id None"),
        (1, "Leader <member> re-joining group during Stable"),
        (2, "Removing member <member> on LeaveGroup; client reason: gone"),
    ]
    assert found[1].at - found[0].at == pytest.approx(0.252)
    assert [r.old_generation for r in rebalances(LOG, "g-10")] == [0]  # g-1's prefix does not match
    assert rebalances(LOG, "g-1") == []


def test_log_time_reads_asctime_on_the_wall_clock_scale():
    assert log_time("2026-11-22 07:04:40,118") - log_time("2026-11-22 07:04:39,866") == pytest.approx(0.252)


def test_between_moves_both_bounds_back_by_the_stamps_millisecond_truncation():
    found = [Rebalance(10.000, 0, "a"), Rebalance(10.4995, 1, "b"), Rebalance(11.0, 2, "c")]
    assert [r.reason for r in between(found, 10.0005, 11.0)] == ["a", "b"]  # "a" may be 10.0009 really
    assert between(found, 10.002, 10.4) == []
    # "b" may really be 10.5003: stamped before a phase boundary at 10.5, it counts after it, not before
    assert [r.reason for r in between(found, 10.0, 10.5)] == ["a"]
    assert [r.reason for r in between(found, 10.5, 12.0)] == ["b", "c"]


def test_timeline_is_relative_to_the_origin():
    assert timeline([Rebalance(10.25, 1, "x")], origin=10.0) == [[0.25, 1, "x"]]


def test_log_tail_returns_each_complete_line_once(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("one\ntw")
    tail = LogTail(path)
    assert tail.read_new() == "one\n"
    with open(path, "a") as f:
        f.write("o\nthree\n")
    assert tail.read_new() == "two\nthree\n"
    assert tail.read_new() == ""
