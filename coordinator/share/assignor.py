"""The simple share assignor ("simple", Kafka's default for share groups): Kafka 4's SimpleAssignor with
its SimpleHomogeneousAssignmentBuilder / SimpleHeterogeneousAssignmentBuilder
(group-coordinator/src/main/java/org/apache/kafka/coordinator/group/assignor/).

In a share group a partition may go to several members: with M members and P partitions each partition
is wanted by `sharing = ceil(M / P)` members, and member i (in member order) by
`ceil(q * (i + 1)) - ceil(q * i)` partitions, q = sharing * P / M -- so the counts of any two members
differ by at most one, and members may outnumber partitions (three members, one partition: all three
share it). Balance first, then stickiness: a member keeps what it has, within its count, then
  1. drop partitions of topics it no longer subscribes to (or that no longer exist),
  2. drop partitions from members over their count,
  3. drop members from partitions shared by more than `sharing`,
  4. hand partitions short of `sharing` members to members short of their count, cycling through them
     (a member never gets a partition twice; a partition no remaining member can take stays short).
When every member subscribes to the same topics the steps run once over all their partitions; otherwise
once per topic over the members subscribed to it.

Kafka walks Java hash maps and sets, whose order kcoord cannot reproduce; here every walk is in sorted
order (members by id, partitions by topic id then index), so an assignment is deterministic: the same
members, subscriptions, partition counts and current assignment give the same result.
"""
from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

NAME = "simple"

Assignment = dict[uuid.UUID, frozenset[int]]
TopicPartition = tuple[uuid.UUID, int]


class PartitionAssignorError(Exception):
    """Kafka's PartitionAssignorException: a member subscribes to a topic the metadata does not know."""


def assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partition_counts: Mapping[uuid.UUID, int],
           current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]] | None = None) -> dict[str, Assignment]:
    """The target assignment of a share group (SimpleAssignor.assign).

    subscriptions     member id -> the topic ids it subscribes to
    partition_counts  topic id -> its number of partitions (a subscribed topic missing: error)
    current           member id -> its current target assignment (for stickiness)
    """
    current = current or {}
    members = sorted(subscriptions)
    if not members:
        return {}
    topics = sorted(set().union(*subscriptions.values()))
    for topic in topics:
        if topic not in partition_counts:
            raise PartitionAssignorError(f"Members are subscribed to topic {topic} which doesn't exist "
                                         "in the topic metadata.")
    held = {m: {(t, p) for t, ps in current.get(m, {}).items() for p in ps} for m in members}
    result: dict[str, set[TopicPartition]] = {m: set() for m in members}
    homogeneous = len({subscriptions[m] for m in members}) == 1
    groups = [(topics, members)] if homogeneous else \
        [([t], [m for m in members if t in subscriptions[m]]) for t in topics]
    for group_topics, group_members in groups:
        targets = [(t, p) for t in group_topics for p in range(partition_counts[t])]
        target_set = set(targets)
        builder = _Builder(group_members, targets,
                           {m: {tp for tp in held[m] if tp in target_set} for m in group_members})
        for m, tps in builder.build().items():
            result[m] |= tps
    out: dict[str, Assignment] = {}
    for m in members:
        by_topic: dict[uuid.UUID, set[int]] = {}
        for t, p in sorted(result[m]):
            by_topic.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


class _Builder:
    """The four steps over one set of members and target partitions (both in order)."""

    def __init__(self, members: list[str], targets: list[TopicPartition],
                 kept: dict[str, set[TopicPartition]]) -> None:
        self.members, self.targets = members, targets
        n_members, n_targets = len(members), len(targets)
        self.sharing = (n_members + n_targets - 1) // n_targets if n_targets else 0
        q = self.sharing * n_targets / n_members if n_members else 0.0
        self.wanted = {m: math.ceil(q * (i + 1)) - math.ceil(q * i) for i, m in enumerate(members)}
        self.by_member = {m: set(kept[m]) for m in members}   # step 1: what is still assignable stays
        self.by_partition: dict[TopicPartition, set[str]] = {tp: set() for tp in targets}
        for m in members:
            for tp in self.by_member[m]:
                self.by_partition[tp].add(m)

    def build(self) -> dict[str, set[TopicPartition]]:
        if not self.targets:
            return {m: set() for m in self.members}
        unfilled = [m for m in self.members if len(self.by_member[m]) < self.wanted[m]]
        for m in self.members:  # step 2: members over their count give up their last partitions
            extra = len(self.by_member[m]) - self.wanted[m]
            for tp in sorted(self.by_member[m], reverse=True)[:max(extra, 0)]:
                self._drop(m, tp)
        for tp in self.targets:  # step 3: partitions shared too widely lose their last members
            extra = len(self.by_partition[tp]) - self.sharing
            for m in sorted(self.by_partition[tp], reverse=True)[:max(extra, 0)]:
                self._drop(m, tp)
                if m not in unfilled:
                    unfilled.append(m)
        self._fill(sorted(unfilled, key=self.members.index))
        return self.by_member

    def _drop(self, member: str, tp: TopicPartition) -> None:
        self.by_member[member].discard(tp)
        self.by_partition[tp].discard(member)

    def _fill(self, unfilled: list[str]) -> None:
        """Step 4, SimpleHomogeneousAssignmentBuilder.assignRemainingPartitions: one pass over the
        partitions, a cursor cycling over the members still short of their count."""
        cursor, progressed = 0, False
        for tp in self.targets:
            if not unfilled:
                return
            holders = self.by_partition[tp]
            while len(holders) < self.sharing and unfilled:
                if cursor >= len(unfilled):
                    if not progressed:
                        break  # no remaining member can take this partition
                    cursor, progressed = 0, False
                member = unfilled[cursor]
                if member in holders:
                    cursor += 1
                    continue
                holders.add(member)
                self.by_member[member].add(tp)
                progressed = True
                if len(self.by_member[member]) >= self.wanted[member]:
                    del unfilled[cursor]
                else:
                    cursor += 1
