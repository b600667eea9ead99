"""What an assignor is told about the members (Kafka's GroupSpec and MemberSubscriptionSpec)."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import NamedTuple


class AssignmentMemberSpec(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]


class MemberSpecs(Mapping):
    """member id -> AssignmentMemberSpec, each built when first read. `homogeneous`: the topic ids every
    member subscribes to, when the group knows they all subscribe to the same ones (Kafka's
    SubscriptionType.HOMOGENEOUS, from its per-topic subscriber counts), else None. An assignor that
    needs no more than that and the member ids never builds a spec: no Python step per member."""

    def __init__(self, members: Mapping, spec_of: Callable[[object], AssignmentMemberSpec],
                 homogeneous: frozenset[uuid.UUID] | None = None, joining: str | None = None,
                 current_token: object = None) -> None:
        self._members = members
        self._spec_of = spec_of
        self._specs: dict[str, AssignmentMemberSpec] = {}
        self.homogeneous = homogeneous
        self.joining = joining  # the member the caller updates, when it has no target yet (a hint)
        self.current_token = current_token  # the assignor step whose result the current target is (a hint)

    def __getitem__(self, member_id: str) -> AssignmentMemberSpec:
        spec = self._specs.get(member_id)
        if spec is None:
            spec = self._specs[member_id] = self._spec_of(self._members[member_id])
        return spec

    def __iter__(self):
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def keys(self):
        return self._members.keys()  # a dict's view: set operations on it run in C
