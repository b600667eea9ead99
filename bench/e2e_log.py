"""One group's rebalances, and why, and where the server spent their time, read from kcoord's INFO log.

The coordinator logs every rebalance it prepares ("Preparing to rebalance group G ... with old
generation N (...) (reason: R)", coordinator/rebalance.py), the join phase's end ("Stabilized group G
generation N"), the leader's assignment ("Assignment received from leader ... for group G for
generation N", coordinator/sync.py) and the group's Stable moment, after its metadata was written
("Group G transitioned to Stable with generation N"). The e2e bench keeps these per rep and phase, so a
slow rep shows whether it took extra generations and who asked for them (e.g. "Leader <member>
re-joining group during Stable"), or whether the server's write of the assignment was slow (an fsync on
a shared disk), instead of only being slow.

Parsing is pure (tests/bench/test_e2e_log.py); LogTail only reads what the server appended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

# broker/run.py's format: "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STAMP = r"^(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+: "
REBALANCE, JOINED, ASSIGNMENT, STABLE = "rebalance", "joined", "assignment", "stable"
_EVENTS = [
    (REBALANCE, re.compile(_STAMP + r"Preparing to rebalance group (?P<group>\S+) in state \S+ "
                           r"with old generation (?P<gen>\d+) .*\(reason: (?P<reason>.*)\)$")),
    (JOINED, re.compile(_STAMP + r"Stabilized group (?P<group>\S+) generation (?P<gen>\d+) ")),
    (ASSIGNMENT, re.compile(_STAMP + r"Assignment received from leader \S+ for group (?P<group>\S+) "
                            r"for generation (?P<gen>\d+)\.")),
    (STABLE, re.compile(_STAMP + r"Group (?P<group>\S+) transitioned to Stable with generation (?P<gen>\d+) ")),
]
# member ids are "<client.id>-<uuid4>"; one per rep and member, so they would make every reason unique
_MEMBER_ID = re.compile(r"\S+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NO_CLIENT_REASON = "; client reason: not provided"
STAMP_RESOLUTION_S = 0.001  # asctime keeps milliseconds, truncated


@dataclass(frozen=True)
class Event:
    at: float  # wall clock (time.time() scale) the server logged it, to the millisecond
    kind: str  # REBALANCE, JOINED, ASSIGNMENT or STABLE
    generation: int  # a rebalance's old generation; the others' new one
    reason: str = ""  # a rebalance's, member ids replaced by <member>


def log_time(stamp: str) -> float:
    """asctime ("2026-11-22 07:04:39,866", local time, as logging writes it) -> time.time() scale."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def group_events(text: str, group: str) -> list[Event]:
    """Every rebalance event the log shows for `group`, in log order."""
    found = []
    for line in text.splitlines():
        for kind, pattern in _EVENTS:
            m = pattern.match(line)
            if m and m["group"] == group:
                reason = m["reason"] if kind == REBALANCE else ""
                reason = _MEMBER_ID.sub("<member>", reason).replace(_NO_CLIENT_REASON, "")
                found.append(Event(log_time(m["stamp"]), kind, int(m["gen"]), reason))
                break
    return found


def rebalance_reasons(timeline: list) -> list[str]:
    """The reasons of the rebalances in a timeline (see timeline())."""
    return [reason for _, kind, _, reason in timeline if kind == REBALANCE]


def write_waits(timeline: list) -> list[float]:
    """Per generation in a timeline, seconds from the leader's assignment to Stable: the server writing
    the group's metadata (fsynced) before it answers SyncGroup."""
    assigned = {gen: at for at, kind, gen, _ in timeline if kind == ASSIGNMENT}
    return [round(at - assigned[gen], 3) for at, kind, gen, _ in timeline if kind == STABLE and gen in assigned]


def between(found: list[Event], start: float, end: float) -> list[Event]:
    """Those logged in [start, end) by the wall clock. A stamp is its moment truncated to the
    millisecond, so one stamped in [t - 1 ms, t) may be at t: both bounds move back by that much, which
    keeps adjacent phases apart (a LeaveGroup logged within a millisecond of the close() that sent it
    belongs to the leave, not to the forming before it)."""
    return [r for r in found if start - STAMP_RESOLUTION_S <= r.at < end - STAMP_RESOLUTION_S]


def timeline(found: list[Event], origin: float) -> list[list]:
    """[[seconds after origin, kind, generation, reason], ...]: compact for a rep's JSON sample."""
    return [[round(e.at - origin, 3), e.kind, e.generation, e.reason] for e in found]


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
