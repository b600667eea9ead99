"""The checker of the Jepsen-style run (tests/cluster/test_nemesis_e2e.py): pure functions over what the run
recorded, each returning its problems as sentences (empty: the property holds). No I/O, no clock: the
times in the samples are the recorder's, seconds since the run began.

- lost_writes / duplicate_writes: every acknowledged record is read back at its acknowledged offset; no
  value is read twice (the producer is idempotent: not even an unacknowledged one);
- committed_offset_regressions: once a commit of offset X is acknowledged, or an OffsetFetch answered X,
  an OffsetFetch sent later never answers less (Kafka: a group's committed offsets only move forward
  unless reset by an admin, which this run never does);
- two_leaders_at_one_epoch: a partition's leader epoch names one leader, whichever node is asked
  (KRaft's PartitionChangeBuilder bumps the epoch on every leader change)."""
from __future__ import annotations

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


__all__ = ["Ack", "LeaderSample", "OffsetSample", "committed_offset_regressions", "duplicate_writes",
           "lost_writes", "two_leaders_at_one_epoch"]
