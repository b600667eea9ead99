"""Pure logic of the e2e benchmark: when a group is stable, when to leave, how reps are summed up.

No clients, sockets or clocks here, so tests/bench/test_e2e_stats.py can pin it exactly.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from dataclasses import dataclass, field

from bench.e2e_log import ASSIGNMENT, JOINED, REBALANCE, STABLE, rebalance_reasons, write_waits
from bench.runner import median, ratio

# What one consumer holds: its partitions and the monotonic time its client applied them (the
# rebalance callback), so a stable moment is exact, not "whenever our poll loop next looked".
Held = tuple[frozenset[int], float]


def stable_since(held: list[Held], partitions: int) -> float | None:
    """The moment the group became stable, or None if it is not stable now.

    Stable: every consumer holds a non-empty share, the shares are disjoint and cover every
    partition. Nothing has changed since the last of those shares was applied, so that is when.
    """
    seen: set[int] = set()
    for parts, _ in held:
        if not parts or seen & parts:
            return None
        seen |= parts
    if len(seen) != partitions or not held:
        return None
    return max(at for _, at in held)


def leave_delays(reps: int, settle_s: float, window_s: float, seed: int) -> list[float]:
    """Seconds from the group's stable moment to the leaver's close(), one per rep.

    What a leave costs depends on where it falls in the clients' timers: the others notice it at
    their next heartbeat, whose timer restarts when their join completes (the stable moment), and
    librdkafka's whole rebalance latency cycles with about a 1 s period. Leaving at a fixed time
    after stable would measure one point of those cycles. So every leave comes after `settle_s` of
    stability and at a phase stratified across `window_s` (a whole period), shuffled by `seed`: the
    reps sample the window evenly, and both clients get exactly the same phases rep by rep.
    """
    phases = [(k + 0.5) * window_s / reps for k in range(reps)]
    random.Random(seed).shuffle(phases)
    return [settle_s + p for p in phases]


@dataclass
class Rep:
    """One client's rep: a group forms, then one consumer leaves; each event timed."""

    client: str
    form: float | None = None
    leave: float | None = None
    leave_delay: float = 0.0  # when, after stable, the leave was due (bench.e2e_stats.leave_delays)
    failure: str = ""  # why the rep stopped early; an event timed before it still counts
    client_bug: bool = False  # that failure was the client's own (kafka-python's abandoned join)
    # The server's rebalance events in each phase, [[s after the phase began, kind, generation,
    # reason], ...] (bench.e2e_log.timeline). Each phase needs exactly one rebalance: the first
    # JoinGroup's, the LeaveGroup's. More means extra generations, and their reasons say whose doing
    # they were.
    form_events: list = field(default_factory=list)
    leave_events: list = field(default_factory=list)


SLOW_WRITE_S = 0.1  # the server's metadata write (an fsync) takes ~2 ms; over this it stalled


def extra_rebalances(timeline: list) -> list[str]:
    """The reasons of a phase's rebalances beyond the one the phase needs."""
    return rebalance_reasons(timeline)[1:]


def slow_write(timeline: list) -> bool:
    return any(w > SLOW_WRITE_S for w in write_waits(timeline))


def _reps_with(reps: list[Rep], has) -> str:
    return "/".join(str(sum(bool(has(getattr(r, f"{phase}_events"))) for r in reps)) for phase in ("form", "leave"))


# Where a formed group's time went, by the server's log (the client's own timings at both ends)
FORM_STAGES = ("first JoinGroup", "join phase(s)", "leader's assignment", "metadata write", "callbacks after Stable")


def form_stages(rep: Rep) -> list[float] | None:
    """A formed rep's time in FORM_STAGES: subscriptions -> the server's first rebalance -> its last
    join phase done (the initial delay; extra generations too) -> the leader's SyncGroup -> Stable
    (the group's metadata written) -> the last client's assignment callback. None if incomplete."""
    at = {kind: [t for t, k, _, _ in rep.form_events if k == kind] for kind in (REBALANCE, JOINED, ASSIGNMENT, STABLE)}
    if rep.form is None or not all(at.values()):
        return None
    points = [0.0, at[REBALANCE][0], at[JOINED][-1], at[ASSIGNMENT][-1], at[STABLE][-1], rep.form]
    return [round(b - a, 3) for a, b in zip(points, points[1:], strict=False)]


def form_stage_notes(reps: list[Rep]) -> list[str]:
    """Per client, the median of each form stage: what the client adds, and where."""
    notes = []
    for client in dict.fromkeys(r.client for r in reps):
        stages = [st for r in reps if r.client == client and (st := form_stages(r)) is not None]
        if stages:
            notes.append(f"{client} form stages, medians over {len(stages)} reps: " + ", ".join(
                f"{name} {median(col):.3f} s" for name, col in zip(FORM_STAGES, zip(*stages, strict=True), strict=True)))
    return notes


def extra_rebalance_notes(reps: list[Rep]) -> list[str]:
    """Per client and phase, how many reps took extra rebalances and why, most frequent first."""
    notes = []
    for client in dict.fromkeys(r.client for r in reps):
        for phase in ("form", "leave"):
            timelines = [getattr(r, f"{phase}_events") for r in reps if r.client == client]
            reasons = Counter(reason for t in timelines for reason in extra_rebalances(t))
            if reasons:
                slow = sum(bool(extra_rebalances(t)) for t in timelines)
                notes.append(f"{client}, {phase}: {slow} reps took extra rebalances: " + "; ".join(
                    f"{n}x {reason}" for reason, n in reasons.most_common()))
    return notes


def _spread(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"{q1:.3f}–{q3:.3f}"


# Each client's figure is the mean of the middle 80% of its reps. Both clients' leave times are
# sawtooths over the leave phase (librdkafka's from ~0.5 s down to ~0.03 s with period 0.5 s, see
# bench.e2e.SETTLE_S), flat distributions for which a mean wanders less than a median; the trim
# drops what can hit any 2 of 28 reps: a server write stalled on the shared disk (0.1-2 s), a leave
# that just missed librdkafka's tick (+0.5 s). Measured over 9 runs of 28 reps: the leave ratio's
# range was +-11% with this, +-16% with medians; the form ratio's +-5% and +-4%.
TRIM = 0.1


def trimmed_mean(values, trim: float = TRIM) -> float:
    """The mean of `values` (None dropped) without the lowest and highest `trim` of them; NaN if empty."""
    kept = sorted(v for v in values if v is not None)
    cut = int(len(kept) * trim)
    kept = kept[cut:len(kept) - cut]
    return statistics.fmean(kept) if kept else float("nan")


def _centres(reps: list[Rep]) -> tuple[float, float]:
    return trimmed_mean(r.form for r in reps), trimmed_mean(r.leave for r in reps)


def _half(reps: list[Rep], which: int) -> list[Rep]:
    return sorted(reps, key=lambda r: r.leave_delay)[which::2]


def summarize(reps: list[Rep], baseline: str) -> list[dict]:
    """One row per client: trimmed means (TRIM) over every event timed, ratios against `baseline`'s;
    the medians too, for comparison with earlier runs.

    A failed event has no time, so it cannot enter a mean; its rep is counted instead, as a
    client bug or as a failure (the coordinator's, or unexplained), never dropped silently. The
    "halves" columns are the same ratios from two halves of the reps alone: how repeatable the run
    was. The halves alternate in leave-delay order, so each still spans the whole phase window
    (a leave's time depends strongly on its phase; a random half would not).
    """
    clients = list(dict.fromkeys(r.client for r in reps))
    by_client = {c: [r for r in reps if r.client == c] for c in clients}
    base = by_client.get(baseline, [])
    base_form, base_leave = _centres(base)
    halves = [(_centres(_half(base, h)), h) for h in (0, 1)]
    rows = []
    for client, mine in by_client.items():
        form, leave = _centres(mine)
        half_ratios = [(_centres(_half(mine, h)), b) for b, h in halves]
        rows.append(
            {
                "client": client,
                "form stable s": form,
                "form IQR s": _spread([r.form for r in mine if r.form is not None]),
                "ratio form": ratio(form, base_form),
                "leave -> stable s": leave,
                "leave IQR s": _spread([r.leave for r in mine if r.leave is not None]),
                "ratio leave": ratio(leave, base_leave),
                "ratio halves form/leave": " ".join(
                    f"{ratio(m[0], b[0]):.2f}/{ratio(m[1], b[1]):.2f}" for m, b in half_ratios
                ),
                "medians form/leave s": f"{median(r.form for r in mine):.3f}/{median(r.leave for r in mine):.3f}",
                "reps w/ extra rebalances form/leave": _reps_with(mine, extra_rebalances),
                f"reps w/ write > {SLOW_WRITE_S}s form/leave": _reps_with(mine, slow_write),
                "ok reps": sum(not r.failure for r in mine),
                "client-bug reps": sum(r.client_bug for r in mine),
                "failed reps": sum(bool(r.failure) and not r.client_bug for r in mine),
            }
        )
    return rows
