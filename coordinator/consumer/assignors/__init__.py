"""Server-side assignors (Kafka's group/assignor): name -> assignor. `uniform` is the default
(group.consumer.assignors lists uniform first).

An assignor maps members to partitions: `assign(members, topics, current)` where members is
member id -> AssignmentMemberSpec, topics is topic id -> partition count (the subscribed topics that
exist), current is member id -> the current target assignment (for stickiness). It returns
member id -> {topic id: frozenset(partitions)} with every member present. Pure and deterministic.
"""
from __future__ import annotations

import uuid
from typing import NamedTuple

from coordinator.consumer.assignors.range import RangeAssignor
from coordinator.consumer.assignors.uniform import UniformAssignor


class AssignmentMemberSpec(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]


ASSIGNORS = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
DEFAULT_ASSIGNOR = "uniform"
