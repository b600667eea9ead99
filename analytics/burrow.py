"""Burrow's consumer evaluation rules, as pure functions (core/internal/evaluator/caching.go).

A partition is judged from a window of its last `intervals` commits (offset, commit time, lag at the
commit), its current lag and the head offsets seen recently. Order of the rules, as Burrow applies
them: no current lag -> OK; STOP; REWIND; lag was zero somewhere in the window -> OK; STALL; WARN; OK.
"""
from dataclasses import dataclass

OK, WARN, ERR, STOP, STALL, REWIND = "OK", "WARN", "ERR", "STOP", "STALL", "REWIND"
# Burrow's protocol.StatusConstant values, so statuses sort by severity the way Burrow reports them.
CODES = {"NOTFOUND": 0, OK: 1, WARN: 2, ERR: 3, STOP: 4, STALL: 5, REWIND: 6}
INTERVALS = 10                 # commits kept per partition (Burrow `intervals`)
OFFSET_REFRESH_MS = 10_000     # Burrow's broker offset refresh; "recent" = INTERVALS of these


@dataclass(frozen=True)
class Window:
    offsets: list              # oldest first
    timestamps: list           # commit times, ms
    lags: list                 # lag at each commit (None if unknown)


def _stopped(w: Window, now_ms) -> bool:
    first, last = w.timestamps[0], w.timestamps[-1]
    return now_ms - last > last - first


def _rewound(w: Window) -> bool:
    for i in range(1, len(w.offsets)):
        if w.offsets[i] < w.offsets[i - 1] and max(w.offsets[i:]) < w.offsets[i - 1]:
            return True
    return False


def _lag_not_decreasing(lags) -> bool:
    return all(b >= a for a, b in zip(lags, lags[1:], strict=False))


def partition_status(w: Window, current_lag, now_ms, recent_heads=(), allowed_lag=0) -> str:
    if not w.offsets or current_lag is None or current_lag <= allowed_lag:
        return OK
    recently_caught_up = any(h <= w.offsets[-1] for h in recent_heads)
    if _stopped(w, now_ms) and not recently_caught_up:
        return STOP
    if _rewound(w):
        return REWIND
    lags = [lag for lag in w.lags if lag is not None]
    if any(lag <= allowed_lag for lag in lags):
        return OK
    if len(set(w.offsets)) == 1:
        return STALL
    if len(lags) > 1 and _lag_not_decreasing(lags):
        return WARN
    return OK


def group_status(partition_statuses) -> str:
    """The worst partition status; STOP, STALL and REWIND count as ERR for the group."""
    worst = OK
    for s in partition_statuses:
        s = ERR if s in (STOP, STALL, REWIND) else s
        if CODES[s] > CODES[worst]:
            worst = s
    return worst
