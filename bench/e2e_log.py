"""The rebalances kcoord started for one group, and why, read from its INFO log.

The coordinator logs every rebalance it prepares: "Preparing to rebalance group G in state S with
old generation N (...) (reason: R)" (coordinator/rebalance.py). The e2e bench counts them per rep
and phase, so a slow rep shows whether it took extra generations and who asked for them (e.g.
"Leader <member> re-joining group during Stable") instead of only being slow.

Parsing is pure (tests/bench/test_e2e_log.py); LogTail only reads what the server appended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

# broker/cli.py's format: "%(asctime)s %(levelname)s %(name)s: %(message)s"
_PREPARE = re.compile(
    r"^(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+: Preparing to rebalance group (?P<group>\S+) "
    r"in state \S+ with old generation (?P<gen>\d+) .*\(reason: (?P<reason>.*)\)$"
)
# member ids are "<client.id>-<uuid4>"; one per rep and member, so they would make every reason unique
_MEMBER_ID = re.compile(r"\S+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NO_CLIENT_REASON = "; client reason: not provided"
STAMP_RESOLUTION_S = 0.001  # asctime keeps milliseconds, truncated


@dataclass(frozen=True)
class Rebalance:
    at: float  # wall clock (time.time() scale) the server logged it, to the millisecond
    old_generation: int
    reason: str  # member ids replaced by <member>


def log_time(stamp: str) -> float:
    """asctime ("2026-11-22 07:04:39,866", local time, as logging writes it) -> time.time() scale."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def rebalances(text: str, group: str) -> list[Rebalance]:
    """Every rebalance the log shows prepared for `group`, in log order."""
    found = []
    for line in text.splitlines():
        m = _PREPARE.match(line)
        if m and m["group"] == group:
            reason = _MEMBER_ID.sub("<member>", m["reason"]).replace(_NO_CLIENT_REASON, "")
            found.append(Rebalance(log_time(m["stamp"]), int(m["gen"]), reason))
    return found


def between(found: list[Rebalance], start: float, end: float) -> list[Rebalance]:
    """Those prepared in [start, end) by the wall clock. A stamp is its moment truncated to the
    millisecond, so one stamped in [t - 1 ms, t) may be at t: both bounds move back by that much, which
    keeps adjacent phases apart (a LeaveGroup logged within a millisecond of the close() that sent it
    belongs to the leave, not to the forming before it)."""
    return [r for r in found if start - STAMP_RESOLUTION_S <= r.at < end - STAMP_RESOLUTION_S]


def timeline(found: list[Rebalance], origin: float) -> list[list]:
    """[[seconds after origin, old generation, reason], ...]: compact for a rep's JSON sample."""
    return [[round(r.at - origin, 3), r.old_generation, r.reason] for r in found]


class LogTail:
    """What a log file gained since the last read (the server appends one line per event)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._offset = 0

    def read_new(self) -> str:
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        # a line still being written stays for next time
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        return complete.decode("utf-8", errors="replace")
