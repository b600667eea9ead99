"""The checker of the Jepsen-style run (tests/cluster/test_nemesis_e2e.py): pure functions over what the run
recorded, each returning its problems as sentences (empty: the property holds). No I/O, no clock: the
times in the samples are the recorder's, seconds since the run began.

- lost_writes / duplicate_writes: every acknowledged record is read back at its acknowledged offset; no
  value is read twice (the producer is idempotent: not even an unacknowledged one);
- committed_offset_regressions: once a commit of offset X is acknowledged, or an OffsetFetch answered X,
  an OffsetFetch sent later never answers less (Kafka: a group's committed offsets only move forward
  unless reset by an admin, which this run never does);
- two_leaders_at_one_epoch: a partition's leader epoch names one leader, whichever node is asked
  (KRaft's PartitionChangeBuilder bumps the epoch on every leader change);
- two_active_coordinators_at_one_epoch: at one coordinator epoch (the leader epoch of the group's
  `__consumer_offsets` partition, which Kafka's GroupCoordinatorService.onElection takes as the shard's
  epoch) at most one node serves the group; a node that does not own the shard answers NOT_COORDINATOR
  (CoordinatorRuntime.scheduleReadOperation / scheduleWriteOperation on a shard not loaded here);
- duplicates_outside_uncommitted_window: a record a group consumes a second time lies at or after the
  highest offset committed (acknowledged) before the last coordinator kill preceding that consumption:
  a new coordinator serves every acknowledged commit, so consumers never resume below one."""
from __future__ import annotations

import bisect
import collections
from collections.abc import Iterable
from dataclasses import dataclass

Record = tuple[int, int, str]  # (partition, offset, value) as read back


@dataclass(frozen=True, slots=True)
class Ack:
    """A write the producer's client acknowledged."""
    value: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class OffsetSample:
    """A committed offset seen: an OffsetFetch sent at `sent` and answered at `answered` (-1: none), or an
    acknowledged OffsetCommit (sent .. answered)."""
    sent: float
    answered: float
    partition: int
    offset: int
    source: str = "fetch"  # "fetch" or "commit"


@dataclass(frozen=True, slots=True)
class LeaderSample:
    """What node `via` answered in Metadata for a partition at time `t`."""
    t: float
    via: int
    topic: str
    partition: int
    leader: int
    epoch: int


@dataclass(frozen=True, slots=True)
class CoordinatorSample:
    """Node `via` asked about the group at time `t`: whether it served it as coordinator (`active`: the
    answer was not NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS), and the leader epoch of the group's
    `__consumer_offsets` partition it reported in Metadata both just before and just after (a sample is
    taken only when the two agree)."""
    t: float
    via: int
    active: bool
    epoch: int


@dataclass(frozen=True, slots=True)
class Consumed:
    """A group member consumed `partition`@`offset`, seen at `t`."""
    t: float
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Committed:
    """`offset` (the next to consume) of `partition` was known committed at `t`: a commit the member saw
    acknowledged, or an OffsetFetch answer."""
    t: float
    partition: int
    offset: int


def lost_writes(acks: Iterable[Ack], records: Iterable[Record]) -> list[str]:
    where: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for partition, offset, value in records:
        where[value].append((partition, offset))
    problems = []
    for ack in acks:
        found = where.get(ack.value)
        if not found:
            problems.append(f"acknowledged {ack.value} (p{ack.partition}@{ack.offset}) lost")
        elif (ack.partition, ack.offset) not in found:
            problems.append(f"acknowledged {ack.value} at p{ack.partition}@{ack.offset}, read at {found}")
    return problems


def duplicate_writes(records: Iterable[Record]) -> list[str]:
    counts = collections.Counter(value for _p, _o, value in records)
    return [f"{value} read {n} times" for value, n in counts.items() if n > 1]


def committed_offset_regressions(samples: Iterable[OffsetSample]) -> list[str]:
    """Problems: an OffsetFetch sent after a higher offset was known committed (answered by an earlier
    fetch or acknowledged to the committer) that answers less."""
    ordered = sorted(samples, key=lambda s: s.answered)
    problems = []
    for sample in (s for s in ordered if s.source == "fetch"):
        floor = max((s for s in ordered if s.partition == sample.partition and s.answered < sample.sent),
                    key=lambda s: s.offset, default=None)
        if floor is not None and sample.offset < floor.offset:
            problems.append(f"p{sample.partition}: OffsetFetch sent at {sample.sent:.3f} s answered {sample.offset}, "
                            f"but {floor.offset} was committed ({floor.source} answered at {floor.answered:.3f} s)")
    return problems


def two_leaders_at_one_epoch(samples: Iterable[LeaderSample]) -> list[str]:
    leaders: dict[tuple[str, int, int], dict[int, LeaderSample]] = collections.defaultdict(dict)
    for s in samples:
        if s.leader >= 0:
            leaders[(s.topic, s.partition, s.epoch)].setdefault(s.leader, s)
    return [f"{topic}-{partition} epoch {epoch}: leaders "
            + ", ".join(f"{leader} (node {s.via} said so at {s.t:.3f} s)" for leader, s in sorted(by.items()))
            for (topic, partition, epoch), by in sorted(leaders.items()) if len(by) > 1]


def two_active_coordinators_at_one_epoch(samples: Iterable[CoordinatorSample]) -> list[str]:
    active: dict[int, dict[int, CoordinatorSample]] = collections.defaultdict(dict)
    for s in samples:
        if s.active:
            active[s.epoch].setdefault(s.via, s)
    return [f"coordinator epoch {epoch}: served by nodes "
            + ", ".join(f"{via} (at {s.t:.3f} s)" for via, s in sorted(by.items()))
            for epoch, by in sorted(active.items()) if len(by) > 1]


def duplicates_outside_uncommitted_window(consumed: Iterable[Consumed], committed: Iterable[Committed],
                                          kills: Iterable[float]) -> list[str]:
    """Problems: a record consumed again (its second and later consumptions, in time order) below the
    highest offset of its partition known committed before the last kill preceding that consumption."""
    kill_times = sorted(kills)
    commits = sorted(committed, key=lambda c: c.t)
    floors: list[dict[int, int]] = []  # per kill: partition -> highest committed before it
    for kill in kill_times:
        floor: dict[int, int] = {}
        for c in commits:
            if c.t >= kill:
                break
            floor[c.partition] = max(floor.get(c.partition, -1), c.offset)
        floors.append(floor)
    seen: set[tuple[int, int]] = set()
    problems = []
    for c in sorted(consumed, key=lambda c: c.t):
        key = (c.partition, c.offset)
        if key not in seen:
            seen.add(key)
            continue
        k = bisect.bisect_right(kill_times, c.t) - 1
        if k < 0:
            continue
        floor = floors[k].get(c.partition, -1)
        if c.offset < floor:
            problems.append(f"p{c.partition}@{c.offset} consumed again at {c.t:.3f} s, below {floor}, committed "
                            f"before the kill at {kill_times[k]:.3f} s")
    return problems


__all__ = ["Ack", "Committed", "Consumed", "CoordinatorSample", "LeaderSample", "OffsetSample",
           "committed_offset_regressions", "duplicate_writes", "duplicates_outside_uncommitted_window",
           "lost_writes", "two_active_coordinators_at_one_epoch", "two_leaders_at_one_epoch"]
