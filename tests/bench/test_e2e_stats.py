"""The e2e benchmark's pure logic: stable moments, leave phases, and which reps enter the medians."""

from __future__ import annotations

import math

import pytest

from bench.e2e_log import ASSIGNMENT, JOINED, REBALANCE, STABLE
from bench.e2e_stats import (
    FORM_STAGES,
    SLOW_WRITE_S,
    Rep,
    extra_rebalance_notes,
    extra_rebalances,
    form_stage_notes,
    form_stages,
    leave_delays,
    stable_since,
    summarize,
    trimmed_mean,
)


def held(*shares):
    return [(frozenset(parts), at) for parts, at in shares]


def test_stable_since_is_when_the_last_current_share_was_applied():
    assert stable_since(held(({0, 1}, 5.0), ({2}, 7.5), ({3}, 6.0)), partitions=4) == 7.5


@pytest.mark.parametrize(
    "shares",
    [
        (({0, 1}, 1.0), (set(), 2.0), ({2, 3}, 3.0)),  # one consumer holds nothing (revoked, rejoining)
        (({0, 1}, 1.0), ({1, 2, 3}, 2.0)),  # two hold partition 1: old and new assignments overlap
        (({0}, 1.0), ({1}, 2.0)),  # partitions 2 and 3 are nobody's (the leaver's, not yet reassigned)
        (),
    ],
)
def test_not_stable_while_a_share_is_empty_overlapping_or_missing(shares):
    assert stable_since(held(*shares), partitions=4) is None


def test_leave_delays_stratify_the_window_after_settling_one_phase_per_rep():
    delays = leave_delays(4, settle_s=1.5, window_s=0.4, seed=3)
    assert sorted(delays) == pytest.approx([1.55, 1.65, 1.75, 1.85])


def test_leave_delays_are_the_same_for_the_same_seed_and_shuffled_across_seeds():
    assert leave_delays(8, 1.5, 0.5, seed=1) == leave_delays(8, 1.5, 0.5, seed=1)
    assert len({tuple(leave_delays(8, 1.5, 0.5, seed=s)) for s in range(5)}) > 1


def _rows(reps):
    return {row["client"]: row for row in summarize(reps, baseline="base")}


def test_means_and_ratios_are_over_every_timed_event_against_the_baseline():
    rows = _rows([
        Rep("base", form=1.0, leave=0.1, leave_delay=1.1),
        Rep("other", form=3.0, leave=0.4, leave_delay=1.1),
        Rep("base", form=2.0, leave=0.3, leave_delay=1.7),
        Rep("other", form=5.0, leave=0.6, leave_delay=1.7),
        Rep("base", form=3.0, leave=0.2, leave_delay=1.3),
        Rep("other", form=4.0, leave=0.5, leave_delay=1.3),
    ])
    assert rows["base"]["form stable s"] == pytest.approx(2.0) and rows["base"]["leave -> stable s"] == pytest.approx(0.2)
    assert rows["other"]["ratio form"] == pytest.approx(2.0) and rows["other"]["ratio leave"] == pytest.approx(2.5)
    assert rows["other"]["medians form/leave s"] == "4.000/0.500"
    assert rows["other"]["ok reps"] == 3
    # halves alternate in leave-delay order: delays 1.1 and 1.7 (base 1.5 / 0.2, other 4.0 / 0.5),
    # then 1.3 (base 3.0 / 0.2, other 4.0 / 0.5)
    assert rows["other"]["ratio halves form/leave"] == "2.67/2.50 1.33/2.50"


def test_trimmed_mean_drops_the_lowest_and_highest_tenth_and_ignores_missing_events():
    values = [0.2] * 8 + [0.25, 2.0, None]  # 10 timed: one at each end goes
    assert trimmed_mean(values) == pytest.approx((0.2 * 8 + 0.25 - 0.2) / 8)
    assert trimmed_mean([0.3, 0.5]) == pytest.approx(0.4)  # too few to trim
    assert math.isnan(trimmed_mean([None]))


def test_a_client_bug_rep_keeps_its_earlier_events_and_is_counted_not_hidden():
    rows = _rows([
        Rep("base", form=1.0, leave=0.2),
        Rep("other", form=2.0, failure="kafka-python client bug: ...", client_bug=True),
        Rep("other", failure="kafka-python client bug: ...", client_bug=True),
        Rep("other", form=4.0, leave=0.4),
    ])
    other = rows["other"]
    assert (other["ok reps"], other["client-bug reps"], other["failed reps"]) == (1, 2, 0)
    assert other["form stable s"] == pytest.approx(3.0) and other["leave -> stable s"] == pytest.approx(0.4)  # failed: nothing


def test_a_coordinator_failure_is_a_failed_rep_not_a_client_bug():
    rows = _rows([Rep("base", form=1.0, leave=0.2), Rep("base", failure="not stable after 30s")])
    assert (rows["base"]["ok reps"], rows["base"]["client-bug reps"], rows["base"]["failed reps"]) == (1, 0, 1)


def test_a_client_with_no_timed_event_gets_nan_ratios_not_a_crash():
    rows = _rows([Rep("base", form=1.0, leave=0.2), Rep("other", failure="x", client_bug=True)])
    assert math.isnan(rows["other"]["ratio form"]) and math.isnan(rows["other"]["ratio leave"])
    assert rows["other"]["form IQR s"] == "-"


def _t(*reasons, write=0.002):
    """A phase's timeline: one rebalance per reason, the last generation assigned and then Stable."""
    events = [[0.1 * i, REBALANCE, i, reason] for i, reason in enumerate(reasons)]
    gen = len(reasons)
    return events + [[0.3, ASSIGNMENT, gen, ""], [0.3 + write, STABLE, gen, ""]]


def test_extra_rebalances_are_those_beyond_the_one_each_phase_needs_counted_per_rep_with_reasons():
    reps = [
        Rep("other", form=0.4, leave=0.2, form_events=_t("join", "Leader re-joining", "Leader re-joining"),
            leave_events=_t("leave")),
        Rep("other", form=0.2, leave=0.3, form_events=_t("join"), leave_events=_t("leave", "Leader re-joining")),
        Rep("other", form=0.2, leave=0.1, form_events=_t("join", "expired"), leave_events=_t("leave")),
        Rep("base", form=0.2, leave=0.2, form_events=_t("join"), leave_events=_t("leave")),
    ]
    assert extra_rebalances(reps[0].form_events) == ["Leader re-joining", "Leader re-joining"]
    rows = _rows(reps)
    assert rows["other"]["reps w/ extra rebalances form/leave"] == "2/1"
    assert rows["base"]["reps w/ extra rebalances form/leave"] == "0/0"
    assert extra_rebalance_notes(reps) == [
        "other, form: 2 reps took extra rebalances: 2x Leader re-joining; 1x expired",
        "other, leave: 1 reps took extra rebalances: 1x Leader re-joining",
    ]


def test_reps_whose_server_write_stalled_are_counted_per_phase():
    reps = [
        Rep("base", form=0.2, leave=0.2, form_events=_t("join", write=0.5), leave_events=_t("leave")),
        Rep("base", form=0.2, leave=0.2, form_events=_t("join", write=0.09), leave_events=_t("leave", write=0.2)),
    ]
    assert _rows(reps)["base"][f"reps w/ write > {SLOW_WRITE_S}s form/leave"] == "1/1"


def test_form_stages_split_a_reps_time_at_the_servers_events_the_last_generation_counting():
    events = [[0.02, REBALANCE, 0, "join"], [0.22, JOINED, 1, ""], [0.25, REBALANCE, 1, "Leader re-joining"],
              [0.35, JOINED, 2, ""], [0.36, ASSIGNMENT, 2, ""], [0.365, STABLE, 2, ""]]
    rep = Rep("other", form=0.38, form_events=events)
    assert form_stages(rep) == pytest.approx([0.02, 0.33, 0.01, 0.005, 0.015])
    assert form_stages(Rep("other", form=0.38, form_events=events[:2])) is None  # never assigned: no split
    assert form_stages(Rep("other", form_events=events)) is None  # never stable on the clients' side
    note = form_stage_notes([rep, Rep("base", form=0.2)])
    assert note == ["other form stages, medians over 1 reps: " + ", ".join(
        f"{name} {v:.3f} s" for name, v in zip(FORM_STAGES, [0.02, 0.33, 0.01, 0.005, 0.015], strict=True))]
