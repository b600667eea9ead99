"""Server-side assignors (Kafka's group/assignor): name -> assignor. `uniform` is the default
(group.consumer.assignors lists uniform first).

An assignor maps members to partitions: `assign(members, topics, current)` where members is
member id -> AssignmentMemberSpec (a dict, or a MemberSpecs that builds them on demand), topics is topic id -> partition count (the subscribed topics that
exist), current is member id -> the current target assignment (for stickiness). It returns
member id -> {topic id: frozenset(partitions)} with every member present. Pure and deterministic.
"""
from __future__ import annotations

from kcoord.coordinator.consumer.assignors.range import RangeAssignor
from kcoord.coordinator.consumer.assignors.spec import AssignmentMemberSpec, MemberSpecs
from kcoord.coordinator.consumer.assignors.uniform import UniformAssignor

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "AssignmentMemberSpec", "MemberSpecs"]

ASSIGNORS = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
DEFAULT_ASSIGNOR = "uniform"
